//! Logging in the shape users know from the hardware stack's logs.
//!
//! A build runs inside a `package.build{tile_count operations}` span and each
//! phase inside a `package.phase{phase}` span; when a phase ends it logs
//! `package build phase finished phase=… elapsed_ms=… success=…`.
//! Filtering follows `RUST_LOG` syntax, read from `IPUB_LOG` first and then
//! `RUST_LOG`.

use std::time::Instant;
use tracing_subscriber::EnvFilter;

/// Installs the global subscriber: timestamps, level, spans, fields, on
/// stderr. `default_level` applies when no filter variable is set.
pub fn init(default_level: &str) {
    init_with(None, default_level)
}

/// Like [`init`], with an explicit filter that takes precedence.
pub fn init_with(explicit: Option<&str>, default_level: &str) {
    let spec = explicit
        .map(str::to_string)
        .or_else(|| std::env::var("IPUB_LOG").ok())
        .or_else(|| std::env::var("RUST_LOG").ok())
        .unwrap_or_else(|| default_level.to_string());
    // Salsa reports every query execution at info level; that is for
    // debugging ipub itself, so it is shown only when asked for by name.
    let spec = if spec.contains("salsa") {
        spec
    } else {
        format!("{spec},salsa=warn")
    };
    let filter = EnvFilter::try_new(&spec).unwrap_or_else(|error| {
        eprintln!("warning: ignoring log filter `{spec}`: {error}");
        EnvFilter::new(format!("{default_level},salsa=warn"))
    });
    // A second initialisation (tests) is harmless, so its error is ignored.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

/// The span of one package build.
pub fn build_span(tile_count: u32, operations: usize) -> tracing::Span {
    tracing::info_span!("package.build", tile_count, operations)
}

/// Runs `work` as the build phase `phase`, inside its span, and logs the
/// seed's `package build phase finished` event with the elapsed time and
/// whether it succeeded.
pub fn phase<T, E>(phase: &'static str, work: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
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
