//! One module per `ipub` command; each `run` returns the process exit code.

pub mod build;
pub mod check;
pub mod clean;
pub mod explain;
pub mod inspect;
pub mod kernel;
pub mod kernel_run;
pub mod profile;
pub mod run;
pub mod stamp;
pub mod tensors;
pub mod watch;
