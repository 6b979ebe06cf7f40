//! Emission: from a placed program to tile images and the package's tables.

pub mod bindings;
