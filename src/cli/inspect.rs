//! `ipub inspect`: what a package holds, as stable text.

use crate::package::{inspect, read};
use camino::Utf8PathBuf;

#[derive(Debug, clap::Args)]
pub struct InspectArgs {
    /// A package written by `ipub build` (`*.ipuexe`).
    pub package: Utf8PathBuf,
}

pub fn run(args: &InspectArgs) -> anyhow::Result<i32> {
    let package = read(&args.package)?;
    print!("{}", inspect::render(&package));
    Ok(0)
}
