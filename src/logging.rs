//! Logging in the shape users know from the hardware stack's logs.
//!
//! A build runs inside a `package.build{tile_count operations}` span and each
//! phase inside a `package.phase{phase}` span; when a phase ends it logs
//! `package build phase finished phase=… elapsed_ms=… success=…`.
//! Filtering follows `RUST_LOG` syntax, read from `IPUB_LOG` first and then
//! `RUST_LOG`. The command line shows warnings only unless asked for more
//! (`-v`, a filter, or `--log-file`, see [`init_cli`]): its own status lines
//! say what happened, and these logs are for digging deeper.

use camino::Utf8Path;
use std::time::Instant;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{fmt, EnvFilter, Layer};

/// Where the logs go and how much of them.
#[derive(Clone, Copy, Debug, Default)]
pub struct LogOptions<'a> {
    /// `--log FILTER`: wins over everything else.
    pub filter: Option<&'a str>,
    /// How many `-v`: 1 shows the seed-shaped `info` logs, 2 `debug`, 3
    /// `trace`; they win over `IPUB_LOG` and `RUST_LOG`.
    pub verbose: u8,
    /// `-q`: only errors (unless a filter says otherwise).
    pub quiet: bool,
    /// `--log-file PATH`: the logs also go there, at `info` at least,
    /// with timestamps and without colour.
    pub file: Option<&'a Utf8Path>,
    /// Whether stderr shows colour (the terminal's and `--color`'s say).
    pub ansi: bool,
    /// Whether stderr is a terminal; timestamps are only shown there.
    pub terminal: bool,
}

/// The command line's logging: by default warnings only, on stderr,
/// without timestamps or colour unless stderr is a terminal; more with
/// `-v` or a filter; also to a file when asked. Returns an error when the
/// log file cannot be opened.
pub fn init_cli(options: &LogOptions<'_>) -> std::io::Result<()> {
    let level = |verbose: u8| match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let asked = options
        .filter
        .map(str::to_string)
        .or_else(|| (options.verbose > 0).then(|| level(options.verbose).to_string()))
        .or_else(|| std::env::var("IPUB_LOG").ok())
        .or_else(|| std::env::var("RUST_LOG").ok());
    let quiet_default = if options.quiet { "error" } else { "warn" };
    let stderr_spec = asked.clone().unwrap_or_else(|| quiet_default.to_string());
    let stderr_layer = fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(options.ansi);
    let stderr_layer = if options.terminal {
        stderr_layer.boxed()
    } else {
        stderr_layer.without_time().boxed()
    };
    let stderr_layer = stderr_layer.with_filter(filter_of(&stderr_spec, quiet_default));
    let file_layer = match options.file {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?;
            let spec = asked.unwrap_or_else(|| level(options.verbose.max(1)).to_string());
            Some(
                fmt::layer()
                    .with_writer(std::sync::Mutex::new(file))
                    .with_target(false)
                    .with_ansi(false)
                    .with_filter(filter_of(&spec, "info")),
            )
        }
        None => None,
    };
    // A second initialisation (tests) is harmless, so its error is ignored.
    let _ = tracing_subscriber::registry()
        .with(stderr_layer)
        .with(file_layer)
        .try_init();
    Ok(())
}

/// `spec` as a filter, with salsa's and notify's own logs only when asked
/// for.
fn filter_of(spec: &str, fallback: &str) -> EnvFilter {
    // Salsa reports every query execution at info level; that is for
    // debugging ipub itself. Notify warns that it cannot unwatch a
    // directory that was deleted, which `ipub watch` expects and handles.
    // Each is shown only when asked for by name.
    let quiet = |spec: &str| {
        let mut spec = spec.to_string();
        for (target, level) in [("salsa", "warn"), ("notify", "error")] {
            if !spec.contains(target) {
                spec.push_str(&format!(",{target}={level}"));
            }
        }
        spec
    };
    let spec = quiet(spec);
    EnvFilter::try_new(&spec).unwrap_or_else(|error| {
        eprintln!("warning: ignoring log filter `{spec}`: {error}");
        EnvFilter::new(quiet(fallback))
    })
}

/// The span of one package build.
pub(crate) fn build_span(tile_count: u32, operations: usize) -> tracing::Span {
    tracing::info_span!("package.build", tile_count, operations)
}

/// Runs `work` as the build phase `phase`, inside its span, and logs the
/// seed's `package build phase finished` event with the elapsed time and
/// whether it succeeded.
pub(crate) fn phase<T, E>(
    phase: &'static str,
    work: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    let span = tracing::info_span!("package.phase", phase);
    let _entered = span.enter();
    let start = Instant::now();
    let result = work();
    let elapsed_ms = start.elapsed().as_millis() as u64;
    tracing::info!(
        phase,
        elapsed_ms,
        success = result.is_ok(),
        "package build phase finished"
    );
    result
}

/// A problem reported once among the clones of one value: the first
/// [`ReportOnce::first`] is true (a warning), every later one false (the
/// debug log), so a cache that cannot be used at all costs one line, not
/// one per entry.
#[derive(Clone, Debug, Default)]
pub(crate) struct ReportOnce(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl ReportOnce {
    /// Whether this is the first report.
    pub(crate) fn first(&self) -> bool {
        !self.0.swap(true, std::sync::atomic::Ordering::Relaxed)
    }
}
