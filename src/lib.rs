//! ipub: an incremental compiler and runner for IPU21 application packages.
//!
//! The pipeline, the codemap and the invariants are in `ARCHITECTURE.md`.
//! This crate root only declares the layers:
//!
//! - [`target`]: the machine as data;
//! - [`graph`]: the validated project graph every phase starts from;
//! - [`db`]: the salsa database and its file inputs (the core does no IO).

pub mod cli;
pub mod db;
pub mod device;
pub mod fsutil;
pub mod graph;
pub mod isa;
pub mod logging;
pub mod lower;
pub mod package;
pub mod place;
pub mod plan;
pub mod profile;
pub mod schedule;
pub mod target;
