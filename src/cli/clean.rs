//! `ipub clean`: remove persisted results (and, with `--all`, the kernel
//! cache), or evict the least recently used entries of both beyond a size
//! budget.
//!
//! Only what ipub wrote is removed: entries named by their keys, and the
//! temporary files of interrupted writes. `$IPUB_CACHE_DIR` may name a
//! directory that also holds the user's files (a project whose kernel
//! sources are in `kernels/`); those are kept and counted.

use crate::kernels::cache::KernelCache;
use crate::store::{cache_root, megabytes_to_bytes, Cleaned, Store};
use camino::Utf8Path;

#[derive(Debug, clap::Args)]
pub struct CleanArgs {
    /// Also remove compiled kernels, not only persisted query results.
    /// Not with `--keep-mb`, which evicts from both.
    #[arg(long, conflicts_with = "keep_mb")]
    pub all: bool,
    /// Instead of removing everything, evict the least recently used
    /// entries of the result store and of the kernel cache until each
    /// holds at most this many megabytes (and nothing unused for
    /// `--max-age-days`).
    #[arg(long, value_name = "MB")]
    pub keep_mb: Option<u64>,
    /// With `--keep-mb`: drop entries unused for this many days.
    #[arg(long, default_value_t = 30, value_name = "DAYS", requires = "keep_mb")]
    pub max_age_days: u64,
}

pub fn run(args: &CleanArgs) -> anyhow::Result<i32> {
    let store = Store::default_location();
    if let Some(mb) = args.keep_mb {
        let (bytes, age) = (megabytes_to_bytes(mb), days(args.max_age_days));
        let removed = store.evict(bytes, age);
        report_evicted(store.root(), removed);
        let kernels = KernelCache::new(cache_root());
        report_evicted(&kernels.dir(), kernels.evict(bytes, age));
        return Ok(0);
    }
    report(store.root(), &store.clean()?);
    if args.all {
        let kernels = KernelCache::new(cache_root());
        report(&cache_root().join("kernels"), &kernels.clean()?);
    }
    Ok(0)
}

fn days(days: u64) -> std::time::Duration {
    std::time::Duration::from_secs(days.saturating_mul(24 * 3600))
}

/// What an eviction from `dir` did, on stdout.
fn report_evicted(dir: &Utf8Path, removed: usize) {
    let entries = if removed == 1 { "entry" } else { "entries" };
    super::output::print(format_args!("evicted {removed} {entries} from {dir}\n"));
}

/// What a clean of `dir` did, on stdout.
fn report(dir: &Utf8Path, cleaned: &Cleaned) {
    if !cleaned.found {
        super::output::print(format_args!("nothing to remove: {dir} does not exist\n"));
        return;
    }
    super::output::print(format_args!(
        "removed {} files from {dir} ({} bytes)\n",
        cleaned.files, cleaned.bytes
    ));
    match cleaned.kept {
        0 => {}
        1 => super::output::print(format_args!(
            "kept 1 file or directory in {dir} that ipub did not write\n"
        )),
        kept => super::output::print(format_args!(
            "kept {kept} files or directories in {dir} that ipub did not write\n"
        )),
    }
}
