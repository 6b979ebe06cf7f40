//! Emission: from a placed program to tile images and the package's tables.
//!
//! - [`steps`]: compute steps numbered once, and each tile's part in them;
//! - [`tile`]: a tile's supervisor routines, linked kernels, kernel states
//!   and iteration counters;
//! - [`bindings`]: host bindings as byte runs between tensors and tiles.

pub mod bindings;
pub mod package;
pub mod steps;
pub mod tile;
