//! A live status line on stderr for long phases and the simulation.
//!
//! Drawn only when stderr is a terminal and the output is the default
//! human one (not `-q`, not `-v`, whose logs would tear it, not JSON);
//! everywhere else a [`Progress`] does nothing, so scripts and tests see
//! exactly the lines they saw before. A line appears only once its work
//! has taken [`DELAY`], so fast phases never flicker, and it is cleared
//! before anything else is printed ([`output::clear_status_line`]).

use super::output::{self, Verbosity};
use anstyle::AnsiColor;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long work runs before its line appears.
const DELAY: Duration = Duration::from_millis(300);
/// How often the line is redrawn.
const TICK: Duration = Duration::from_millis(100);
const BAR_WIDTH: usize = 30;

/// A running piece of work with a status line.
pub(super) struct Progress {
    shared: Option<Arc<Shared>>,
    ticker: Option<std::thread::JoinHandle<()>>,
}

struct Shared {
    verb: String,
    text: Mutex<String>,
    done: AtomicU64,
    total: AtomicU64,
    stop: AtomicBool,
    started: Instant,
}

/// Whether status lines are drawn in this process.
pub(super) fn enabled() -> bool {
    output::verbosity() == Verbosity::Normal && !output::is_json() && output::stderr_is_terminal()
}

impl Progress {
    /// Starts a status line `verb text`, drawn once the work has taken a
    /// moment; nothing at all when status lines are off.
    pub(super) fn start(verb: &str, text: impl Into<String>) -> Progress {
        if !enabled() {
            return Progress {
                shared: None,
                ticker: None,
            };
        }
        let shared = Arc::new(Shared {
            verb: verb.to_string(),
            text: Mutex::new(text.into()),
            done: AtomicU64::new(0),
            total: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            started: Instant::now(),
        });
        let ticker = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("progress".into())
                .spawn(move || {
                    while !shared.stop.load(Ordering::Relaxed) {
                        std::thread::park_timeout(TICK);
                        if shared.started.elapsed() >= DELAY && !shared.stop.load(Ordering::Relaxed)
                        {
                            draw(&shared);
                        }
                    }
                })
                .ok()
        };
        Progress {
            shared: Some(shared),
            ticker,
        }
    }

    /// Reports `done` of `total` units (a bar instead of a spinner).
    pub(super) fn set(&self, done: u64, total: u64) {
        if let Some(shared) = &self.shared {
            shared.done.store(done, Ordering::Relaxed);
            shared.total.store(total, Ordering::Relaxed);
        }
    }

    /// A handle that reports progress from other threads.
    pub(super) fn reporter(&self) -> impl Fn(u64, u64) + Send + Sync + 'static {
        let shared = self.shared.clone();
        move |done, total| {
            if let Some(shared) = &shared {
                shared.done.store(done, Ordering::Relaxed);
                shared.total.store(total, Ordering::Relaxed);
            }
        }
    }

    /// Replaces the text after the verb.
    pub(super) fn set_text(&self, text: impl Into<String>) {
        if let Some(shared) = &self.shared {
            *shared.text.lock().unwrap_or_else(|p| p.into_inner()) = text.into();
        }
    }

    /// Stops and clears the line.
    pub(super) fn finish(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(shared) = self.shared.take() {
            shared.stop.store(true, Ordering::Relaxed);
            if let Some(ticker) = self.ticker.take() {
                ticker.thread().unpark();
                let _ = ticker.join();
            }
            output::clear_status_line();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop();
    }
}

fn draw(shared: &Shared) {
    // The line is written raw (its erase sequences must reach the terminal
    // even when colour is off), so the verb is styled only with colour on.
    let verb_style = if output::stderr_has_color() {
        AnsiColor::Cyan.on_default().bold()
    } else {
        anstyle::Style::new()
    };
    let text = shared
        .text
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let (done, total) = (
        shared.done.load(Ordering::Relaxed),
        shared.total.load(Ordering::Relaxed),
    );
    let elapsed = shared.started.elapsed().as_secs_f64();
    let meter = if total > 0 {
        let filled = ((done.min(total) as f64 / total as f64) * BAR_WIDTH as f64) as usize;
        let head = if filled < BAR_WIDTH { ">" } else { "" };
        format!(
            " [{}{head}{}] {done}/{total}",
            "=".repeat(filled),
            " ".repeat(BAR_WIDTH.saturating_sub(filled + head.len()))
        )
    } else {
        let frames = ['|', '/', '-', '\\'];
        format!(" {}", frames[(elapsed * 10.0) as usize % frames.len()])
    };
    let line = format!(
        "\r\x1b[K{verb_style}{:>10}{verb_style:#} {text}{meter} {elapsed:.1}s",
        shared.verb
    );
    output::draw_status_line(&line);
}
