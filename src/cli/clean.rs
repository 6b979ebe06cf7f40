//! `ipub clean`: remove persisted results (and, with `--all`, the kernel
//! cache), or evict the oldest entries beyond a size budget.

use crate::store::{cache_root, Store};

#[derive(Debug, clap::Args)]
pub struct CleanArgs {
    /// Also remove compiled kernels, not only persisted query results.
    #[arg(long)]
    pub all: bool,
    /// Instead of removing everything, keep the newest entries up to this
    /// many megabytes (and nothing older than `--max-age-days`).
    #[arg(long, value_name = "MB")]
    pub keep_mb: Option<u64>,
    /// With `--keep-mb`: drop entries older than this many days.
    #[arg(long, default_value_t = 30, value_name = "DAYS", requires = "keep_mb")]
    pub max_age_days: u64,
}

pub fn run(args: &CleanArgs) -> anyhow::Result<i32> {
    let store = Store::default_location();
    if let Some(mb) = args.keep_mb {
        let age = std::time::Duration::from_secs(args.max_age_days.saturating_mul(24 * 3600));
        let removed = store.evict(mb * 1024 * 1024, age);
        super::output::print(format_args!(
            "evicted {removed} entries from {}\n",
            store.root()
        ));
        return Ok(0);
    }
    let freed = store.clean()?;
    super::output::print(format_args!("removed {} ({} bytes)\n", store.root(), freed));
    if args.all {
        let kernels = cache_root().join("kernels");
        if kernels.exists() {
            std::fs::remove_dir_all(&kernels)?;
            super::output::print(format_args!("removed {kernels}\n"));
        }
    }
    Ok(0)
}
