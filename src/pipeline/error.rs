//! Why a build stopped: [`BuildError`] wraps each phase's own error type.
//!
//! The project's errors are located diagnostics; a placement that does not
//! fit and kernels that do not compile are the user's to fix; the rest are
//! compiler bugs, grouped by the phase that found them (lowering and its
//! verifiers, emission and packaging), so that the driver can tell a bug
//! from a user error by the variant alone. Every error is a salsa query's
//! result too, so each type here is `Clone` and comparable.

use crate::diagnostic::Diagnostic;
use crate::emit::package::Unaddressed;
use crate::emit::tile::EmitError;
use crate::lower::verify::VerifyError;
use crate::lower::LowerError;
use crate::pipeline::kernels::KernelBuildError;
use crate::place::{PlacementBug, PlacementError};

/// Why a build stopped.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum BuildError {
    #[error("the project has errors")]
    Project(Vec<Diagnostic>),
    #[error("lowering failed (a compiler bug): {0}")]
    Lower(#[from] LowerBug),
    #[error("{0}")]
    Placement(#[from] PlacementError),
    #[error("{0}")]
    Kernel(#[from] KernelErrors),
    #[error("emission failed (a compiler bug): {0}")]
    Emit(#[from] EmitBug),
    /// The program is more than a run may execute (see
    /// `book/src/limits.md`).
    #[error("the program is more than a run may execute: {0}; use fewer repeat iterations")]
    RunTooLong(RunTooLong),
    /// The program's exchanges are more than a package may hold (see
    /// `book/src/limits.md`).
    #[error("the program's exchanges are more than a package may hold: they have {0}; use fewer tiles, or split the operations whose operands arrive in many small pieces")]
    ExchangeTooLarge(String),
    /// A tensor file changed under the build so that it no longer reads.
    #[error("tensor file: {0}")]
    TensorFile(#[from] TensorFileError),
}

impl From<LowerError> for BuildError {
    fn from(error: LowerError) -> Self {
        BuildError::Lower(LowerBug::Lower(error))
    }
}

impl From<KernelBuildError> for BuildError {
    fn from(error: KernelBuildError) -> Self {
        BuildError::Kernel(KernelErrors(vec![error]))
    }
}

impl From<EmitError> for BuildError {
    fn from(error: EmitError) -> Self {
        BuildError::Emit(EmitBug::Tile(error))
    }
}

impl From<Unaddressed> for BuildError {
    fn from(error: Unaddressed) -> Self {
        BuildError::Emit(EmitBug::Package(error))
    }
}

/// A lowered program that the compiler's own checks reject, or that the
/// later queries cannot find their part of.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LowerBug {
    #[error("{0}")]
    Lower(#[from] LowerError),
    #[error("verifier: {0}")]
    Verify(#[from] VerifyError),
    #[error("{0}")]
    Placement(#[from] PlacementBug),
    #[error("tile {0} has no buffers to place")]
    NoBuffers(u32),
}

/// Every kernel variant of the program that is not available, each once
/// (one a line when shown).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelErrors(pub Vec<KernelBuildError>);

impl std::fmt::Display for KernelErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for KernelErrors {}

/// A placed program that emission or packaging cannot turn into bytes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EmitBug {
    #[error("{0}")]
    Tile(#[from] EmitError),
    #[error("{0}")]
    Package(#[from] Unaddressed),
    #[error("tile {0} has no work")]
    NoWork(u32),
    #[error("tensor {0} is not a weight")]
    NotWeight(u32),
    /// The package encoder's message: its error type carries I/O errors,
    /// which are neither `Clone` nor comparable as a query's result must
    /// be, and a build meets only its validation errors, whose message is
    /// all there is to them.
    #[error("{0}")]
    Encode(String),
}

/// A package call the run may not execute whole (the package's own
/// validation says which and why).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid package (calls): call `{call}` {message}")]
pub struct RunTooLong {
    pub call: &'static str,
    pub message: String,
}

/// A tensor file that no longer reads, named by its tensor when the
/// package's copy of the file's values was being made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TensorFileError {
    #[error("{0}")]
    Weight(crate::data::DataError),
    #[error("`{tensor}`: {error}")]
    Values {
        tensor: String,
        error: crate::data::DataError,
    },
}
