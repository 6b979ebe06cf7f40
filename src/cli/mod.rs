//! One module per `ipub` command; each `run` returns the process exit code.
//! What they print goes through [`output`] (status lines, diagnostics,
//! colour, verbosity), [`message`] (JSON messages) and [`progress`] (the
//! live status line).

pub mod build;
pub mod check;
pub mod clean;
pub(crate) mod explain;
pub mod inspect;
pub mod kernel;
pub(crate) mod kernel_run;
pub(crate) mod kernel_source;
pub(crate) mod located;
pub(crate) mod message;
pub mod output;
pub mod profile;
pub(crate) mod progress;
pub(crate) mod remote;
pub mod run;
pub mod schema;
pub mod stamp;
pub(crate) mod tensors;
pub mod watch;
