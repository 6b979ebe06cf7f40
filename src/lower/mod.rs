//! Lowering: selected plans become per-tile buffers, kernel runs and
//! exchange phases (`program.rs` is the IR, `build.rs` the algorithm,
//! `layout.rs` and `view.rs` the index arithmetic both share, `runs.rs`
//! the run-at-a-time gathering of operand pieces, `local.rs` the
//! block-major rearranges of what a tile already holds, `merge.rs` the
//! merging of exchange phases that do not depend on each other).

mod build;
pub(crate) mod layout;
pub(crate) mod local;
mod merge;
pub(crate) mod program;
mod runs;
pub mod verify;
pub(crate) mod view;

pub use build::{lower, LowerError};
pub(crate) use merge::merge_phases;
pub use program::*;
#[cfg(test)]
pub(crate) mod tests;
