//! The terminal: everything the commands print goes through here.
//!
//! Three settings shape it, fixed once per process by `main` (and, for the
//! message format, by the commands that take `--message-format`):
//!
//! - **verbosity**: `-q` prints errors only; the default prints status
//!   lines, results and diagnostics; `-v` adds the tracing logs (set up in
//!   [`crate::logging`], not here);
//! - **colour**: `--color auto|always|never` on top of what `anstream`
//!   detects (a terminal, `NO_COLOR`, `CLICOLOR_FORCE`, `TERM=dumb`), so
//!   colour never reaches a pipe unless asked for;
//! - **message format**: with `json`, stdout carries one JSON object per
//!   line ([`super::message`]) and nothing else; human-readable status
//!   lines move to stderr.
//!
//! Status lines, results and JSON go to stdout; diagnostics, errors and the
//! live progress line ([`super::progress`]) go to stderr.

use super::message::{self, Message};
use crate::db::Database;
use crate::diagnostic::{Diagnostic, Palette, Severity};
use anstyle::{AnsiColor, Style};
use camino::Utf8Path;
use std::io::Write as _;
use std::sync::RwLock;

/// How much the commands print.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verbosity {
    /// Errors only.
    Quiet,
    /// Status lines, results and diagnostics.
    #[default]
    Normal,
    /// Also the tracing logs (`-v`), which `logging` sets up.
    Verbose,
}

/// What stdout carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum MessageFormat {
    /// Text for people.
    #[default]
    Human,
    /// One JSON object per line (see `book/src/messages.md`).
    Json,
}

/// When to colour the output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorWhen {
    /// On a terminal, unless `NO_COLOR` is set (or with `CLICOLOR_FORCE`).
    #[default]
    Auto,
    Always,
    Never,
}

/// The `--message-format` option of the commands that have it.
#[derive(Clone, Copy, Debug, Default, clap::Args)]
pub struct MessageArgs {
    /// `human`, or `json` for one JSON object per line on stdout.
    #[arg(long, value_enum, default_value_t, value_name = "FORMAT")]
    pub message_format: MessageFormat,
}

#[derive(Clone, Copy, Debug)]
struct Settings {
    verbosity: Verbosity,
    format: MessageFormat,
}

static SETTINGS: RwLock<Settings> = RwLock::new(Settings {
    verbosity: Verbosity::Normal,
    format: MessageFormat::Human,
});

fn settings() -> Settings {
    *SETTINGS
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Sets the verbosity and the colour choice for the whole process.
pub fn configure(verbosity: Verbosity, color: ColorWhen) {
    SETTINGS
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .verbosity = verbosity;
    let choice = match color {
        ColorWhen::Auto => anstream::ColorChoice::Auto,
        ColorWhen::Always => anstream::ColorChoice::Always,
        ColorWhen::Never => anstream::ColorChoice::Never,
    };
    choice.write_global();
}

/// Sets what stdout carries (commands with `--message-format`).
pub(super) fn set_format(format: MessageFormat) {
    SETTINGS
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .format = format;
}

pub(super) fn verbosity() -> Verbosity {
    settings().verbosity
}

pub(super) fn is_json() -> bool {
    settings().format == MessageFormat::Json
}

/// Whether stderr shows colour (the resolved choice, for the log layer).
pub fn stderr_has_color() -> bool {
    anstream::AutoStream::choice(&std::io::stderr()) != anstream::ColorChoice::Never
}

/// Whether stderr is a terminal a live status line may be drawn on.
pub fn stderr_is_terminal() -> bool {
    use std::io::IsTerminal as _;
    std::io::stderr().is_terminal() && std::env::var("TERM").map_or(true, |t| t != "dumb")
}

const STATUS: Style = AnsiColor::Green.on_default().bold();
const FAILED: Style = AnsiColor::Red.on_default().bold();
const WARNED: Style = AnsiColor::Yellow.on_default().bold();

/// Whether a live status line ([`super::progress`]) is on the screen now;
/// drawing and clearing hold the lock.
static STATUS_LINE: std::sync::Mutex<bool> = std::sync::Mutex::new(false);

/// Draws a live status line over the current one on stderr.
pub(super) fn draw_status_line(line: &str) {
    let mut drawn = STATUS_LINE.lock().unwrap_or_else(|p| p.into_inner());
    let mut stderr = std::io::stderr();
    let _ = stderr.write_all(line.as_bytes());
    let _ = stderr.flush();
    *drawn = true;
}

/// Clears the status line, if one is drawn, so other output starts on a
/// clean line (the line comes back at the next tick).
pub(super) fn clear_status_line() {
    let mut drawn = STATUS_LINE.lock().unwrap_or_else(|p| p.into_inner());
    if *drawn {
        let mut stderr = std::io::stderr();
        let _ = stderr.write_all(b"\r\x1b[K");
        let _ = stderr.flush();
        *drawn = false;
    }
}

/// Writes to stdout, or to stderr when stdout carries JSON, so that
/// human text never mixes into the messages.
fn human(text: &str) {
    clear_status_line();
    if is_json() {
        let _ = anstream::stderr().write_all(text.as_bytes());
    } else {
        record_stdout(anstream::stdout().write_all(text.as_bytes()));
    }
}

/// The first failure to write standard output (a full disk, a closed
/// descriptor), if any. `main` reports it as an error and exits 1 once the
/// command is done: a script reading the output must not take a short one
/// for the whole. (A reader that went away ends the process at `SIGPIPE`
/// instead, as it ends `cat`.)
static STDOUT_FAILURE: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

fn record_stdout(result: std::io::Result<()>) {
    if let Err(error) = result {
        let mut failure = STDOUT_FAILURE.lock().unwrap_or_else(|p| p.into_inner());
        failure.get_or_insert_with(|| error.to_string());
    }
}

/// A command's output on stdout (a listing, a report): written as
/// `print!` would, but a failure is recorded for [`stdout_failure`]
/// rather than a panic.
pub(crate) fn print(text: std::fmt::Arguments<'_>) {
    clear_status_line();
    record_stdout(anstream::stdout().write_fmt(text));
}

/// Flushes stdout and returns the first failure to write it, if any.
pub fn stdout_failure() -> Option<String> {
    record_stdout(std::io::stdout().flush());
    STDOUT_FAILURE
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
}

fn to_stderr(text: &str) {
    clear_status_line();
    let _ = anstream::stderr().write_all(text.as_bytes());
}

/// A status line: a right-aligned verb in the cargo style, then `text`.
pub(super) fn status(verb: &str, text: impl std::fmt::Display) {
    if verbosity() == Verbosity::Quiet {
        return;
    }
    human(&format!(
        "{STATUS}{verb:>10}{STATUS:#} {text}\n",
        STATUS = status_style(verb)
    ));
}

/// Failing verbs in red, the rest in green.
fn status_style(verb: &str) -> Style {
    match verb {
        "failed" | "fault" => FAILED,
        _ => STATUS,
    }
}

/// A line of results (already formatted, styles allowed).
pub(super) fn result_line(text: impl std::fmt::Display) {
    if verbosity() == Verbosity::Quiet {
        return;
    }
    human(&format!("{text}\n"));
}

/// Text as it is (dumps, reports), for people.
pub(super) fn text(text: &str) {
    if verbosity() == Verbosity::Quiet || text.is_empty() {
        return;
    }
    human(text);
}

/// `error: message` on stderr, whatever the verbosity.
pub fn error(message: impl std::fmt::Display) {
    to_stderr(&format!("{FAILED}error{FAILED:#}: {message}\n"));
}

/// `  = help: message` under an error on stderr, whatever the verbosity.
pub(super) fn help(message: impl std::fmt::Display) {
    to_stderr(&format!("  = help: {message}\n"));
}

/// `warning: message` on stderr, unless quiet.
pub(super) fn warning(message: impl std::fmt::Display) {
    if verbosity() == Verbosity::Quiet {
        return;
    }
    to_stderr(&format!("{WARNED}warning{WARNED:#}: {message}\n"));
}

/// A coloured verdict word (`PASS` green, anything else red).
pub(super) fn verdict(word: &str) -> String {
    let style = if word == "PASS" { STATUS } else { FAILED };
    format!("{style}{word}{style:#}")
}

/// A JSON message on stdout, when the format is JSON.
pub(super) fn message(message: &Message<'_>) {
    if !is_json() {
        return;
    }
    let line = message::to_line(message);
    record_stdout(anstream::stdout().write_all(line.as_bytes()));
}

/// Diagnostics with the database's view of their files: rendered on
/// stderr (warnings not when quiet), or as JSON messages of `project`.
pub(super) fn diagnostics(db: &Database, project: &Utf8Path, diagnostics: &[Diagnostic]) {
    use crate::db::Db as _;
    let source = |path: &Utf8Path| {
        db.file(path)
            .contents(db)
            .as_deref()
            .ok()
            .map(str::to_string)
    };
    diagnostics_with(&source, project, diagnostics);
}

/// [`diagnostics`] with any way of reading a file's text.
pub(super) fn diagnostics_with(
    source: &dyn Fn(&Utf8Path) -> Option<String>,
    project: &Utf8Path,
    diagnostics: &[Diagnostic],
) {
    for diagnostic in diagnostics {
        if is_json() {
            message(&Message::CompilerMessage {
                project: project.as_str(),
                message: message::DiagnosticMessage::of(diagnostic, source),
            });
            continue;
        }
        if diagnostic.severity == Severity::Warning && verbosity() == Verbosity::Quiet {
            continue;
        }
        let rendered = crate::diagnostic::render_with(diagnostic, source, &Palette::terminal());
        to_stderr(&format!("{rendered}\n"));
    }
}

/// `N warnings` / `1 warning` / `N errors`.
pub(super) fn count(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// The summary line after a project's warnings: `warning: `x` generated 2
/// warnings`, as cargo says it.
pub(super) fn warning_summary(name: &str, warnings: usize) {
    if warnings > 0 && !is_json() {
        warning(format!("`{name}` generated {}", count(warnings, "warning")));
    }
}
