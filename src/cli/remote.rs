//! The remote cache options of the commands that build (`build`, `run`,
//! `watch`), and the process's remote tier: installed before the first
//! store is opened, flushed and summarised when the command ends.

use crate::store::config::{self, Flags};
use crate::store::http::{Client, Timeouts};
use crate::store::remote::{Remote, Summary};
use std::time::Duration;

/// How long a command waits at its end for uploads still queued.
const FLUSH_BOUND: Duration = Duration::from_secs(30);

#[derive(Clone, Debug, Default, clap::Args)]
pub struct RemoteArgs {
    /// A shared cache speaking the Bazel remote-cache HTTP protocol
    /// (bazel-remote, nginx with WebDAV) behind the local store
    /// (default: $IPUB_REMOTE_CACHE, else `[cache] remote` in
    /// ~/.config/ipub/config.toml). Credentials: $IPUB_REMOTE_CACHE_TOKEN,
    /// or $IPUB_REMOTE_CACHE_USER and $IPUB_REMOTE_CACHE_PASSWORD.
    #[arg(long, value_name = "URL")]
    pub remote_cache: Option<String>,
    /// Read from the remote cache, never write to it.
    #[arg(long)]
    pub remote_cache_read_only: bool,
    /// Use no remote cache, whatever the environment or configuration say.
    #[arg(long, conflicts_with = "remote_cache")]
    pub no_remote_cache: bool,
}

impl RemoteArgs {
    /// Resolves the remote cache these options, the environment and the
    /// user's configuration file ask for, and installs it for the process.
    /// The returned guard waits for queued uploads (up to a bound) and
    /// prints what crossed the wire when it is dropped.
    pub(super) fn install(&self) -> anyhow::Result<RemoteGuard> {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let flags = Flags {
            url: self.remote_cache.clone(),
            read_only: self.remote_cache_read_only,
            disabled: self.no_remote_cache,
        };
        let file = config::config_path(&env);
        let remote = config::resolve(&flags, &env, file.as_deref())?.map(|settings| {
            tracing::debug!(remote = %settings.endpoint, read_only = settings.read_only, source = %settings.source, "remote cache");
            Remote::new(
                Client::new(settings.endpoint, Timeouts::default()),
                settings.read_only,
            )
        });
        Ok(RemoteGuard {
            remote: crate::store::install_remote(remote),
        })
    }
}

/// Flushes the remote tier's uploads when the command ends.
pub(super) struct RemoteGuard {
    remote: Option<Remote>,
}

impl Drop for RemoteGuard {
    fn drop(&mut self) {
        let Some(remote) = &self.remote else {
            return;
        };
        remote.flush(FLUSH_BOUND);
        if let Some(line) = summary_line(&remote.endpoint().to_string(), &remote.summary()) {
            super::output::status("remote", line);
        }
    }
}

/// What a build moved to and from the remote cache, or `None` when it
/// asked for nothing.
pub(super) fn summary_line(endpoint: &str, summary: &Summary) -> Option<String> {
    let asked =
        summary.fetched + summary.misses + summary.corrupt + summary.uploaded + summary.dropped;
    if asked == 0 && !summary.down {
        return None;
    }
    let mb = |bytes: u64| bytes as f64 / 1e6;
    let mut line = format!(
        "{endpoint}: {} fetched ({:.2} MB), {} missed, {} uploaded ({:.2} MB)",
        summary.fetched,
        mb(summary.fetched_bytes),
        summary.misses,
        summary.uploaded,
        mb(summary.uploaded_bytes)
    );
    if summary.corrupt > 0 {
        line.push_str(&format!(", {} corrupt", summary.corrupt));
    }
    if summary.dropped > 0 {
        line.push_str(&format!(", {} uploads not made", summary.dropped));
    }
    if summary.down {
        line.push_str("; unavailable, built locally");
    }
    Some(line)
}
