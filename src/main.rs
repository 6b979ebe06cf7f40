//! The `ipub` command line. Each command lives in `ipub::cli::<name>` and
//! returns the exit code; this file only parses arguments, sets up logging
//! and reports errors.

use clap::{Parser, Subcommand};
use ipub::cli;
use std::process::ExitCode;

/// Incremental compiler and runner for IPU21 application packages.
#[derive(Debug, Parser)]
#[command(name = "ipub", version, about, long_about = None)]
struct Cli {
    /// Log filter in RUST_LOG syntax (overrides IPUB_LOG and RUST_LOG).
    #[arg(long, global = true, value_name = "FILTER")]
    log: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Build a project through the compiler's phases, one line per phase.
    Build(cli::build::BuildArgs),
    /// Build a project and say why each rebuilt item was rebuilt (`build --explain`).
    Explain(cli::build::ExplainArgs),
    /// Remove persisted build results (and with --all the kernel cache).
    Clean(cli::clean::CleanArgs),
    /// Build a project, run it on the embedded IPU21 model and check its numerics.
    Run(cli::run::RunArgs),
    /// Validate projects; print diagnostics with file:line:column.
    Check(cli::check::CheckArgs),
    /// Rebuild projects on every save of a project, include or kernel source.
    Watch(cli::watch::WatchArgs),
    /// Compile kernel sources; list kernel objects.
    Kernel(cli::kernel::KernelArgs),
    /// Show a package's tiles, memory per tile, kernels, steps, exchanges and bindings.
    Inspect(cli::inspect::InspectArgs),
    /// Summarise a run's cycle profile; export HTML or a Chrome trace.
    Profile(cli::profile::ProfileArgs),
}

fn main() -> ExitCode {
    let args = Cli::parse();
    // Building commands print their own phase lines; the seed-style event
    // log is for runs (and for any command with `--log info`).
    let default_level = match args.command {
        Command::Run(_) => "info",
        _ => "warn",
    };
    ipub::logging::init_with(args.log.as_deref(), default_level);
    let result = match &args.command {
        Command::Build(a) => cli::build::run(a),
        Command::Explain(a) => cli::build::run_explain(a),
        Command::Check(a) => cli::check::run(a),
        Command::Run(a) => cli::run::run(a),
        Command::Clean(a) => cli::clean::run(a),
        Command::Kernel(a) => cli::kernel::run(a),
        Command::Inspect(a) => cli::inspect::run(a),
        Command::Profile(a) => cli::profile::run(a),
        Command::Watch(a) => cli::watch::run(a),
    };
    match result {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(1)
        }
    }
}
