//! Emission: from a placed program to tile images and the package's tables.
//!
//! - [`steps`]: compute steps numbered once, and each tile's part in them;
//! - [`supervisor`]: a tile's supervisor routines as typed instructions,
//!   sized exactly before kernels are linked and encoded after;
//! - [`tile`]: a tile's image: supervisor routines, linked kernels, kernel
//!   states and iteration counters;
//! - [`bindings`]: host bindings as byte runs between tensors and tiles;
//! - [`profile_layout`]: estimates, exchange operations and placements for
//!   the package's profile layout.

pub(crate) mod bindings;
pub(crate) mod package;
pub(crate) mod profile_layout;
pub(crate) mod steps;
pub(crate) mod supervisor;
pub(crate) mod tile;
