//! One module per `ipub` command; each `run` returns the process exit code.
//! What they print goes through [`output`] (status lines, diagnostics,
//! colour, verbosity), [`message`] (JSON messages) and [`progress`] (the
//! live status line).

pub mod build;
pub mod check;
pub mod clean;
pub mod explain;
pub mod inspect;
pub mod kernel;
pub mod kernel_run;
pub mod kernel_source;
pub mod located;
pub mod message;
pub mod output;
pub mod profile;
pub mod progress;
pub mod remote;
pub mod run;
pub mod schema;
pub mod stamp;
pub mod tensors;
pub mod watch;
