//! Differential tests: random valid projects run on the model against the
//! host reference, and incremental builds against clean ones.
//!
//! - [`device_reference`]: generated projects ([`generate`]) must pass their
//!   check or be rejected with a located error;
//! - [`incremental`]: seeded edit sequences ([`edits`]) over copies of the
//!   shipped projects and kernels, built incrementally (one database and
//!   store across the sequence, and `ipub watch`) and clean, must give
//!   byte-identical packages;
//! - [`regressions`]: incremental scenarios that once went wrong.
//!
//! Both random suites run a fixed-seed slice by default and a long run when
//! given a count (see each module).

mod device_reference;
mod edits;
mod generate;
mod incremental;
mod regressions;
mod rng;
mod support;
mod watch;
