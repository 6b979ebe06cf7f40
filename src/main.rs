//! The `ipub` command line. Each command lives in `ipub::cli::<name>` and
//! returns the exit code; this file only parses arguments, sets up the
//! terminal and logging, and reports errors.

use camino::Utf8PathBuf;
use clap::{Parser, Subcommand};
use ipub::cli;
use ipub::cli::output::{self, ColorWhen, Verbosity};
use std::process::ExitCode;

/// Incremental compiler and runner for IPU21 application packages.
#[derive(Debug, Parser)]
#[command(name = "ipub", version, about, long_about = None)]
struct Cli {
    /// Show the logs too: `-v` the info logs, `-vv` debug, `-vvv` trace.
    #[arg(short, long, global = true, action = clap::ArgAction::Count, conflicts_with = "quiet")]
    verbose: u8,
    /// Print errors only.
    #[arg(short, long, global = true)]
    quiet: bool,
    /// When to colour the output: auto (a terminal, unless NO_COLOR is
    /// set), always or never.
    #[arg(long, global = true, value_enum, default_value_t, value_name = "WHEN")]
    color: ColorWhen,
    /// Log filter in RUST_LOG syntax (overrides -v, IPUB_LOG and RUST_LOG).
    #[arg(long, global = true, value_name = "FILTER")]
    log: Option<String>,
    /// Also write the logs (info and up, with timestamps) to this file.
    #[arg(long, global = true, value_name = "PATH")]
    log_file: Option<Utf8PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Build a project through the compiler's phases, one line per phase.
    Build(cli::build::BuildArgs),
    /// Build a project and say why each rebuilt item was rebuilt (`build --explain`).
    Explain(cli::build::ExplainArgs),
    /// Remove persisted build results (and with --all the kernel cache), or
    /// with --keep-mb evict both to a size budget.
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
    /// Print the JSON Schema of the project format (for TOML editors).
    Schema(cli::schema::SchemaArgs),
    /// Run the language server on stdin and stdout (for editors).
    Lsp(ipub::lsp::LspArgs),
}

fn main() -> ExitCode {
    restore_default_sigpipe();
    let args = Cli::parse();
    let verbosity = match (args.quiet, args.verbose) {
        (true, _) => Verbosity::Quiet,
        (false, 0) => Verbosity::Normal,
        (false, _) => Verbosity::Verbose,
    };
    output::configure(verbosity, args.color);
    // The commands print their own status lines; the seed-shaped event log
    // is for `-v`, a filter or a log file.
    let logging = ipub::logging::init_cli(&ipub::logging::LogOptions {
        filter: args.log.as_deref(),
        verbose: args.verbose,
        quiet: args.quiet,
        file: args.log_file.as_deref(),
        ansi: output::stderr_has_color(),
        terminal: output::stderr_is_terminal(),
    });
    if let Err(error) = logging {
        let path = args.log_file.as_deref().map_or("", |p| p.as_str());
        output::error(format!("cannot open the log file {path}: {error}"));
        return ExitCode::from(1);
    }
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
        Command::Schema(a) => cli::schema::run(a),
        Command::Lsp(a) => ipub::lsp::run(a),
    };
    let code = match result {
        Ok(code) => code.clamp(0, 255) as u8,
        Err(error) => {
            output::error(format!("{error:#}"));
            1
        }
    };
    // Output lost on the way (a full disk) fails the command, whatever it
    // did otherwise.
    if let Some(failure) = output::stdout_failure() {
        output::error(format!("cannot write to standard output: {failure}"));
        return ExitCode::from(code.max(1));
    }
    ExitCode::from(code)
}

/// Lets a closed pipe end the process the way it ends `cat` or `grep`.
///
/// Rust ignores `SIGPIPE`, so a write to a pipe whose reader has gone (as
/// with `ipub kernel disasm x.o | head`) fails, and `println!` panics on
/// the failure. With the default action restored the process ends
/// quietly at that write instead (the shell reports status 141), which
/// holds for every command and every line they print. Files ipub writes
/// are written atomically, so ending mid-way never leaves a torn one.
fn restore_default_sigpipe() {
    #[cfg(unix)]
    // SAFETY: setting the default disposition of a signal has no
    // preconditions; it runs first in `main`, before any other thread.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
