//! ipub: an incremental compiler and runner for IPU21 application packages.
//!
//! The pipeline, the codemap and the invariants are in `ARCHITECTURE.md`.
//! This crate root only declares the layers:
//!
//! - [`target`]: the machine as data;
//! - [`graph`]: the validated project graph every phase starts from;
//! - [`vfs`]: where file contents come from (no salsa);
//! - [`data`]: tensor files (`.safetensors`, `.npy`) read and written;
//! - [`db`]: the salsa database and its file inputs (the core does no IO);
//! - [`numerics`], [`reference`](mod@reference), [`compare`]: number formats, the seeded
//!   generator and host reference, and the numerics check;
//! - [`fuzzing`]: the fuzz targets, one per reader of untrusted input.

// The API docs are read with `cargo doc --document-private-items`: a public
// item's doc may point at the crate-private code it is built on.
#![allow(rustdoc::private_intra_doc_links)]

pub mod asm;
pub mod cli;
pub mod compare;
pub mod data;
pub mod db;
pub mod device;
pub mod diagnostic;
pub(crate) mod emit;
pub mod exec;
pub(crate) mod fsutil;
pub(crate) mod fuse;
pub mod fuzzing;
pub mod graph;
pub mod isa;
pub mod kernels;
pub(crate) mod legalize;
pub mod logging;
pub mod lower;
pub mod lsp;
pub(crate) mod numerics;
pub mod package;
pub mod partition;
pub mod pipeline;
pub(crate) mod place;
pub(crate) mod plan;
pub mod profile;
pub mod project;
pub mod reference;
pub(crate) mod schedule;
pub mod store;
pub(crate) mod suggest;
pub mod target;
pub mod vfs;
