//! Which remote cache to use: from the command line, the environment, or
//! the user's configuration file, in that order of precedence.
//!
//! - `--remote-cache URL`, `--remote-cache-read-only`, `--no-remote-cache`;
//! - `IPUB_REMOTE_CACHE` (a URL; empty means unset) and
//!   `IPUB_REMOTE_CACHE_READ_ONLY` (`1`/`true` or `0`/`false`);
//! - `$XDG_CONFIG_HOME/ipub/config.toml`, else `~/.config/ipub/config.toml`:
//!
//! ```toml
//! [cache]
//! remote = "http://cache.example:8080"
//! read_only = true
//! ```
//!
//! Credentials come only from the environment, never from the file:
//! `IPUB_REMOTE_CACHE_TOKEN` (a bearer token), or `IPUB_REMOTE_CACHE_USER`
//! and `IPUB_REMOTE_CACHE_PASSWORD` (basic authentication), or the URL's
//! own `user:password@`. A setting that cannot work (a malformed URL, an
//! unreadable or unknown key in the file) is an error naming where it came
//! from; a server that cannot be reached is not (see [`super::remote`]).

use super::http::{Credentials, Endpoint, UrlError};
use camino::{Utf8Path, Utf8PathBuf};
use serde::Deserialize;

/// The largest configuration file read.
pub(super) const MAX_CONFIG_BYTES: u64 = 64 << 10;

/// What the command line says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Flags {
    pub url: Option<String>,
    pub read_only: bool,
    pub disabled: bool,
}

/// A remote cache to use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Settings {
    pub endpoint: Endpoint,
    pub read_only: bool,
    /// Where the URL came from, for messages.
    pub source: Source,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    Flag,
    Environment,
    File(Utf8PathBuf),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Flag => write!(f, "--remote-cache"),
            Source::Environment => write!(f, "IPUB_REMOTE_CACHE"),
            Source::File(path) => write!(f, "{path}"),
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum ConfigError {
    #[error("the remote cache URL from {from} is not usable: {problem}")]
    Url { from: Source, problem: UrlError },
    #[error("cannot read {path}: {problem}")]
    Read {
        path: Utf8PathBuf,
        problem: crate::fsutil::ReadError,
    },
    #[error("{path}: {message}")]
    File { path: Utf8PathBuf, message: String },
    #[error("{name} must be 1, true, 0 or false")]
    Flag { name: &'static str },
    #[error("IPUB_REMOTE_CACHE_USER is set without IPUB_REMOTE_CACHE_PASSWORD")]
    NoPassword,
}

/// The configuration file's contents.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    cache: CacheTable,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CacheTable {
    remote: Option<String>,
    read_only: Option<bool>,
}

/// Where the user's configuration file is: `$XDG_CONFIG_HOME/ipub`, else
/// `~/.config/ipub`, plus `config.toml`.
pub(crate) fn config_path(env: &dyn Fn(&str) -> Option<String>) -> Option<Utf8PathBuf> {
    let base = env("XDG_CONFIG_HOME")
        .map(Utf8PathBuf::from)
        .or_else(|| env("HOME").map(|home| Utf8PathBuf::from(home).join(".config")))?;
    Some(base.join("ipub").join("config.toml"))
}

/// The remote cache `flags`, the environment (`env`, where unset and empty
/// variables are alike) and the file at `file` ask for, if any.
pub(crate) fn resolve(
    flags: &Flags,
    env: &dyn Fn(&str) -> Option<String>,
    file: Option<&Utf8Path>,
) -> Result<Option<Settings>, ConfigError> {
    if flags.disabled {
        return Ok(None);
    }
    let table = match file {
        Some(path) => read_file(path)?,
        None => CacheTable::default(),
    };
    let (url, source) = match (&flags.url, env("IPUB_REMOTE_CACHE"), table.remote) {
        (Some(url), _, _) => (url.clone(), Source::Flag),
        (None, Some(url), _) => (url, Source::Environment),
        (None, None, Some(url)) => (
            url,
            Source::File(file.map(Utf8Path::to_owned).unwrap_or_default()),
        ),
        (None, None, None) => return Ok(None),
    };
    let read_only = if flags.read_only {
        true
    } else {
        match env("IPUB_REMOTE_CACHE_READ_ONLY").as_deref() {
            Some("1" | "true") => true,
            Some("0" | "false") => false,
            Some(_) => {
                return Err(ConfigError::Flag {
                    name: "IPUB_REMOTE_CACHE_READ_ONLY",
                })
            }
            None => table.read_only.unwrap_or(false),
        }
    };
    let auth = match (
        env("IPUB_REMOTE_CACHE_TOKEN"),
        env("IPUB_REMOTE_CACHE_USER"),
        env("IPUB_REMOTE_CACHE_PASSWORD"),
    ) {
        (Some(token), _, _) => Some(Credentials::Bearer(token)),
        (None, Some(user), Some(password)) => Some(Credentials::Basic { user, password }),
        (None, Some(_), None) => return Err(ConfigError::NoPassword),
        (None, None, _) => None,
    };
    let endpoint = Endpoint::parse(&url, auth).map_err(|problem| ConfigError::Url {
        from: source.clone(),
        problem,
    })?;
    Ok(Some(Settings {
        endpoint,
        read_only,
        source,
    }))
}

/// The `[cache]` table of the file at `path`; a missing file is an empty
/// one.
fn read_file(path: &Utf8Path) -> Result<CacheTable, ConfigError> {
    let text = match crate::fsutil::read_text(path, MAX_CONFIG_BYTES) {
        Ok(text) => text,
        Err(crate::fsutil::ReadError::Missing) => return Ok(CacheTable::default()),
        Err(problem) => {
            return Err(ConfigError::Read {
                path: path.to_owned(),
                problem,
            })
        }
    };
    let file: File = toml::from_str(&text).map_err(|error| ConfigError::File {
        path: path.to_owned(),
        message: error.to_string().trim_end().replace('\n', "\n  "),
    })?;
    Ok(file.cache)
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::{expect, Expect};
    use std::collections::HashMap;

    /// Resolves `flags` with the environment `vars` and a configuration
    /// file holding `file` (none when `None`), and shows the outcome.
    fn check(flags: Flags, vars: &[(&str, &str)], file: Option<&str>, expected: Expect) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = Utf8PathBuf::from_path_buf(dir.path().join("config.toml")).expect("utf-8");
        if let Some(text) = file {
            std::fs::write(&path, text).expect("write");
        }
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let env = |name: &str| vars.get(name).filter(|v| !v.is_empty()).cloned();
        let shown = match resolve(&flags, &env, Some(&path)) {
            Ok(None) => "no remote".to_string(),
            Ok(Some(settings)) => format!(
                "{:?} read_only={} from {}",
                settings.endpoint,
                settings.read_only,
                match settings.source {
                    Source::File(_) => "the file".to_string(),
                    other => other.to_string(),
                }
            ),
            Err(error) => format!("error: {error}").replace(path.as_str(), "CONFIG"),
        };
        expected.assert_eq(&shown);
    }

    fn flag(url: &str) -> Flags {
        Flags {
            url: Some(url.into()),
            ..Flags::default()
        }
    }

    const FILE: &str = "[cache]\nremote = \"http://file:9090\"\nread_only = true\n";

    #[test]
    fn flags_win_over_the_environment_and_the_environment_over_the_file() {
        check(Flags::default(), &[], None, expect!["no remote"]);
        check(
            Flags::default(),
            &[],
            Some(FILE),
            expect!["Endpoint(http://file:9090) read_only=true from the file"],
        );
        check(
            Flags::default(),
            &[("IPUB_REMOTE_CACHE", "http://env:8080/cache/")],
            Some(FILE),
            expect!["Endpoint(http://env:8080/cache) read_only=true from IPUB_REMOTE_CACHE"],
        );
        check(
            Flags::default(),
            &[
                ("IPUB_REMOTE_CACHE", "http://env"),
                ("IPUB_REMOTE_CACHE_READ_ONLY", "0"),
            ],
            Some(FILE),
            expect!["Endpoint(http://env) read_only=false from IPUB_REMOTE_CACHE"],
        );
        check(
            Flags {
                read_only: true,
                ..flag("http://127.0.0.1:1234")
            },
            &[("IPUB_REMOTE_CACHE", "http://env")],
            Some(FILE),
            expect!["Endpoint(http://127.0.0.1:1234) read_only=true from --remote-cache"],
        );
        check(
            Flags {
                disabled: true,
                ..Flags::default()
            },
            &[("IPUB_REMOTE_CACHE", "http://env")],
            Some(FILE),
            expect!["no remote"],
        );
        // An empty variable is no variable.
        check(
            Flags::default(),
            &[("IPUB_REMOTE_CACHE", "")],
            Some(FILE),
            expect!["Endpoint(http://file:9090) read_only=true from the file"],
        );
    }

    #[test]
    fn credentials_come_from_the_environment_or_the_url_and_are_never_shown() {
        check(
            flag("http://h"),
            &[("IPUB_REMOTE_CACHE_TOKEN", "s3cret-token")],
            None,
            expect!["Endpoint(http://h with credentials) read_only=false from --remote-cache"],
        );
        check(
            flag("http://alice:pa%40ss@h:81/x"),
            &[],
            None,
            expect!["Endpoint(http://h:81/x with credentials) read_only=false from --remote-cache"],
        );
        check(
            flag("http://h"),
            &[("IPUB_REMOTE_CACHE_USER", "alice")],
            None,
            expect!["error: IPUB_REMOTE_CACHE_USER is set without IPUB_REMOTE_CACHE_PASSWORD"],
        );
        check(
            flag("http://h"),
            &[("IPUB_REMOTE_CACHE_TOKEN", "two words")],
            None,
            expect!["error: the remote cache URL from --remote-cache is not usable: its credentials are not valid in an HTTP header"],
        );
    }

    #[test]
    fn unusable_settings_are_errors_naming_their_source() {
        check(
            flag("https://cache.example"),
            &[],
            None,
            expect!["error: the remote cache URL from --remote-cache is not usable: `https://` is not supported: use an `http://` URL (a TLS proxy on this machine can reach an `https://` cache)"],
        );
        check(
            Flags::default(),
            &[("IPUB_REMOTE_CACHE", "cache.example:8080")],
            None,
            expect!["error: the remote cache URL from IPUB_REMOTE_CACHE is not usable: it is not a URL: it must start with `http://`"],
        );
        check(
            Flags::default(),
            &[],
            Some("[cache]\nremote = \"http://h:99999\"\n"),
            expect!["error: the remote cache URL from CONFIG is not usable: its port `99999` is not a number from 1 to 65535"],
        );
        check(
            Flags::default(),
            &[],
            Some("[cache]\nremtoe = \"http://h\"\n"),
            expect![[r#"
                error: CONFIG: TOML parse error at line 2, column 1
                    |
                  2 | remtoe = "http://h"
                    | ^^^^^^
                  unknown field `remtoe`, expected `remote` or `read_only`"#]],
        );
        check(
            Flags::default(),
            &[
                ("IPUB_REMOTE_CACHE", "http://h"),
                ("IPUB_REMOTE_CACHE_READ_ONLY", "yes"),
            ],
            None,
            expect!["error: IPUB_REMOTE_CACHE_READ_ONLY must be 1, true, 0 or false"],
        );
    }
}
