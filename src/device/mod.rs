//! Devices a package runs on. The runtime speaks to the [`lock`] and to a
//! device interface so a hardware driver could sit beside the embedded model.

pub mod embedded;
pub mod engine;
pub(crate) mod lock;
pub mod model;
