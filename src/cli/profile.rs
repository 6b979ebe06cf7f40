//! `ipub profile`: summaries and exports of a run's cycle profile, and
//! `ipub profile diff`: two runs compared.

use crate::fsutil::write_atomic;
use crate::profile::{diff, html, summary, trace, Profile};
use anyhow::Context as _;
use camino::{Utf8Path, Utf8PathBuf};

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ProfileArgs {
    #[command(subcommand)]
    pub command: Option<ProfileCommand>,
    /// A profile written by `ipub run` (`*.profile.json`).
    #[arg(required = true)]
    pub profile: Option<Utf8PathBuf>,
    /// How many rows each summary shows.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Also write the HTML report here (one self-contained file).
    #[arg(long, value_name = "FILE")]
    pub html: Option<Utf8PathBuf>,
    /// Also write a Chrome trace-event file here (opens in Perfetto).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<Utf8PathBuf>,
}

#[derive(Debug, clap::Subcommand)]
pub enum ProfileCommand {
    /// Compare two runs: total and per-operation deltas, the tiles whose
    /// time changed most and what the build changed.
    Diff(DiffArgs),
}

#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// The earlier run's profile.
    pub before: Utf8PathBuf,
    /// The later run's profile.
    pub after: Utf8PathBuf,
    /// How many rows each table shows.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Also write the comparison as an HTML page here.
    #[arg(long, value_name = "FILE")]
    pub html: Option<Utf8PathBuf>,
}

pub fn run(args: &ProfileArgs) -> anyhow::Result<i32> {
    if let Some(ProfileCommand::Diff(diff_args)) = &args.command {
        return run_diff(diff_args);
    }
    let Some(path) = &args.profile else {
        anyhow::bail!("no profile given");
    };
    let profile = Profile::read(path)?;
    super::output::print(format_args!("{}", summary::summary(&profile, args.top)));
    if let Some(out) = &args.html {
        write(out, &html::report(&profile))?;
        super::output::print(format_args!("\nwrote HTML report {out}\n"));
    }
    if let Some(out) = &args.trace {
        write(out, &trace::chrome_trace(&profile))?;
        super::output::print(format_args!(
            "wrote Chrome trace {out} (open it in ui.perfetto.dev or chrome://tracing)\n"
        ));
    }
    Ok(0)
}

fn run_diff(args: &DiffArgs) -> anyhow::Result<i32> {
    let before = Profile::read(&args.before)?;
    let after = Profile::read(&args.after)?;
    let compared = diff::diff(&before, &after, (args.before.as_str(), args.after.as_str()));
    super::output::print(format_args!("{}", diff::text(&compared, args.top)));
    if let Some(out) = &args.html {
        write(out, &html::diff::report(&compared, &before, &after))?;
        super::output::print(format_args!("\nwrote HTML comparison {out}\n"));
    }
    Ok(0)
}

fn write(path: &Utf8Path, text: &str) -> anyhow::Result<()> {
    write_atomic(path, text.as_bytes()).with_context(|| format!("writing {path}"))
}
