//! Build errors as located diagnostics, for the terminal, JSON messages and
//! the language server alike.
//!
//! Project errors already are diagnostics. A placement that does not fit
//! points at `[project] tiles` (more tiles is the remedy it suggests);
//! kernel errors point into the kernel sources, one diagnostic per
//! assembler error, whichever variants met it. Errors that are compiler
//! bugs have no place in the user's files and stay unlocated.

use crate::db::{Db, SourceFile};
use crate::diagnostic::Diagnostic;
use crate::pipeline::kernels::{kernel_object, KernelBuildError, KernelVariant};
use crate::pipeline::{self, BuildError};
use crate::place::PlacementError;

/// The diagnostics of a failed build of `project`.
pub fn build_error_diagnostics(
    db: &dyn Db,
    project: SourceFile,
    error: &BuildError,
) -> Vec<Diagnostic> {
    match error {
        BuildError::Project(diagnostics) => diagnostics.clone(),
        BuildError::Placement(error) => vec![placement_diagnostic(db, project, error)],
        BuildError::Kernel(text) => {
            let diagnostics = kernel_diagnostics(db, project);
            if diagnostics.is_empty() {
                vec![Diagnostic::error(text.clone())]
            } else {
                diagnostics
            }
        }
        other => vec![Diagnostic::error(other.to_string())],
    }
}

/// A tile that does not fit, at the root file's `tiles` value.
fn placement_diagnostic(db: &dyn Db, project: SourceFile, error: &PlacementError) -> Diagnostic {
    let mut diagnostic = Diagnostic::error(format!(
        "tile {} needs {} bytes but only {} are available ({} bytes over)",
        error.tile, error.needed, error.available, error.over
    ))
    .code("placement");
    let loaded = crate::project::loaded_files(db, project);
    let tiles = loaded.files.iter().find(|f| f.is_root).and_then(|f| {
        f.ast
            .project
            .as_ref()
            .map(|p| (f, p.get_ref().tiles.clone()))
    });
    if let Some((file, tiles)) = tiles {
        let count = *tiles.get_ref();
        let plural = if count == 1 { "" } else { "s" };
        diagnostic = diagnostic
            .at(&file.path, tiles.span())
            .label(format!("the program does not fit in {count} tile{plural}"));
    }
    if !error.largest.is_empty() {
        let largest: Vec<String> = error
            .largest
            .iter()
            .map(|(what, bytes)| format!("{what} ({bytes} bytes)"))
            .collect();
        diagnostic = diagnostic.note(format!("largest users: {}", largest.join(", ")));
    }
    if !error.tried.is_empty() {
        diagnostic = diagnostic.note(format!("already tried: {}", error.tried.join("; ")));
    }
    diagnostic.help("try more tiles (`tiles` in [project])")
}

/// The errors of every kernel variant the program runs that did not
/// compile, each once.
pub fn kernel_diagnostics(db: &dyn Db, project: SourceFile) -> Vec<Diagnostic> {
    let Ok(program) = pipeline::program(db, project).clone() else {
        return Vec::new();
    };
    let kernel_dir = pipeline::tiles::kernel_dir(db, project).clone();
    let Some(target) = *pipeline::target_name(db, project) else {
        return Vec::new();
    };
    let mut kernels: Vec<_> = program.kernel_runs().iter().map(|r| r.kernel).collect();
    kernels.sort_unstable();
    kernels.dedup();
    let mut diagnostics: Vec<Diagnostic> = Vec::new();
    for kernel in kernels {
        let variant = KernelVariant::new(db, kernel, kernel_dir.clone(), target);
        let found = match kernel_object(db, variant) {
            Ok(_) => continue,
            Err(KernelBuildError::Compile { diagnostics, .. }) => diagnostics.clone(),
            Err(error @ KernelBuildError::UnknownVariant(_)) => {
                vec![Diagnostic::error(error.to_string())
                    .note(format!("kernel sources are looked for in `{kernel_dir}`"))]
            }
        };
        for diagnostic in found {
            if !diagnostics.contains(&diagnostic) {
                diagnostics.push(diagnostic);
            }
        }
    }
    diagnostics
}
