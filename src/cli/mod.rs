//! One module per `ipub` command; each `run` returns the process exit code.

pub mod inspect;
pub mod profile;
