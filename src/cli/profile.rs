//! `ipub profile`: summaries and exports of a run's cycle profile.

use crate::fsutil::write_atomic;
use crate::profile::{report, Profile};
use anyhow::Context as _;
use camino::Utf8PathBuf;

#[derive(Debug, clap::Args)]
pub struct ProfileArgs {
    /// A profile written by `ipub run` (`*.profile.json`).
    pub profile: Utf8PathBuf,
    /// How many rows each summary shows.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Also write an HTML report here.
    #[arg(long, value_name = "FILE")]
    pub html: Option<Utf8PathBuf>,
    /// Also write a Chrome trace-event file here (opens in Perfetto).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<Utf8PathBuf>,
}

pub fn run(args: &ProfileArgs) -> anyhow::Result<i32> {
    let profile = Profile::read(&args.profile)?;
    print!("{}", report::summary(&profile, args.top));
    if let Some(path) = &args.html {
        write_atomic(path, report::html(&profile, args.top).as_bytes())
            .with_context(|| format!("writing {path}"))?;
        println!("\nwrote HTML report {path}");
    }
    if let Some(path) = &args.trace {
        write_atomic(path, report::chrome_trace(&profile).as_bytes())
            .with_context(|| format!("writing {path}"))?;
        println!("wrote Chrome trace {path} (open it in ui.perfetto.dev or chrome://tracing)");
    }
    Ok(0)
}
