//! What a package may declare, in one place (and listed in
//! `book/src/limits.md`).
//!
//! A package is a file people pass around, so `ipub run PKG` treats it as
//! untrusted: beyond its checksums, everything it declares is bounded by
//! what the target can hold, and checked before it is materialised. Most
//! bounds come from the target itself (no tile receives more bytes than its
//! memory, no tensor is larger than the memory of the tiles it may use);
//! the ones below bound what the target does not (how many transfers and
//! steps), far above what a compiled package of the whole chip needs.

/// The largest package file read: all of the chip's memory (1472 tiles of
/// 624 KiB) is under a gibibyte, so twice that leaves room for the rest.
pub(super) const MAX_PACKAGE_FILE_BYTES: u64 = 2 << 30;

/// Exchange transfers in all programs of a package, decoded: a product on
/// the whole chip whose operand arrives from an elementwise layout moves
/// millions of pieces (`[4096, 1536]` by `[1536, 1536]`, about 2.8 M).
pub(super) const MAX_TRANSFERS: usize = 1 << 24;

/// Exchange transfer destinations in all programs of a package, decoded
/// (eight bytes each: a gibibyte at most).
pub(super) const MAX_DESTINATIONS: usize = 1 << 27;

/// Blocks of all host binding runs of a package (a run's `count`, summed):
/// what host streams copy one by one and validation sweeps. A compiled
/// package stores few runs, but a transposed output still has one block
/// per element; this is eight times the outputs of a full-chip GEMM.
pub(super) const MAX_BINDING_BLOCKS: u64 = 1 << 26;

/// Deepest nesting of `repeat` steps; devices walk them recursively.
pub(super) const MAX_REPEAT_DEPTH: usize = 16;

/// Steps one host call may execute, a repeat's body counted once per
/// iteration: each leaves a record in the cycle profile.
pub(super) const MAX_EXECUTED_STEPS: u64 = 1 << 20;

/// Tile records one host call may leave in the cycle profile (the tiles of
/// every executed compute and exchange step).
pub(crate) const MAX_EXECUTED_TILE_RECORDS: u64 = 1 << 23;
