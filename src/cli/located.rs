//! Build errors as located diagnostics, for the terminal, JSON messages and
//! the language server alike.
//!
//! Project errors already are diagnostics. A placement that does not fit
//! points at `[project] tiles` (more tiles is the remedy it suggests);
//! kernel errors point into the kernel sources, one diagnostic per
//! assembler error, whichever variants met it (the build error carries
//! them), or at `[project] kernels` when a kernel's source is missing from
//! that directory. Errors that are compiler bugs have no place in the
//! user's files and stay unlocated.

use crate::db::{Db, SourceFile};
use crate::diagnostic::Diagnostic;
use crate::pipeline::kernels::KernelBuildError;
use crate::pipeline::{self, BuildError};
use crate::place::PlacementError;
use camino::Utf8Path;

/// The diagnostics of a failed build of `project`.
pub(crate) fn build_error_diagnostics(
    db: &dyn Db,
    project: SourceFile,
    error: &BuildError,
) -> Vec<Diagnostic> {
    match error {
        BuildError::Project(diagnostics) => diagnostics.clone(),
        BuildError::Placement(error) => vec![placement_diagnostic(db, project, error)],
        BuildError::Kernel(errors) => {
            let kernel_dir = pipeline::tiles::kernel_dir(db, project);
            let mut diagnostics = Vec::new();
            for error in &errors.0 {
                for diagnostic in kernel_error_diagnostics(error, kernel_dir) {
                    let diagnostic = at_kernels(db, project, diagnostic);
                    if !diagnostics.contains(&diagnostic) {
                        diagnostics.push(diagnostic);
                    }
                }
            }
            if diagnostics.is_empty() {
                vec![Diagnostic::error(errors.to_string())]
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
        let largest: Vec<String> = error.largest.iter().map(ToString::to_string).collect();
        diagnostic = diagnostic.note(format!("largest users: {}", largest.join(", ")));
    }
    if !error.tried.is_empty() {
        diagnostic = diagnostic.note(format!("already tried: {}", error.tried.join("; ")));
    }
    // With every tile of the project's target in use, there are no more to
    // give: the model itself must shrink.
    let every_tile = crate::pipeline::graph(db, project)
        .is_ok_and(|graph| graph.tiles >= graph.target.spec().tiles);
    match every_tile {
        true => diagnostic.help(
            "the project already uses every tile of the target: use smaller tensors, or split the model",
        ),
        false => diagnostic.help("try more tiles (`tiles` in [project])"),
    }
}

/// A kernel error with no place in the kernel sources, at the root file's
/// `kernels` value when the project sets one. Such an error is about the
/// directory `kernels` names: a kernel's own source it lacks or cannot
/// read (the assembler's only unlocated error), or no source there
/// provides a variant.
fn at_kernels(db: &dyn Db, project: SourceFile, diagnostic: Diagnostic) -> Diagnostic {
    if diagnostic.location.is_some() {
        return diagnostic;
    }
    let loaded = crate::project::loaded_files(db, project);
    let kernels = loaded.files.iter().find(|f| f.is_root).and_then(|f| {
        let kernels = f.ast.project.as_ref()?.get_ref().kernels.as_ref()?;
        Some((f, kernels.span()))
    });
    match kernels {
        Some((file, span)) => diagnostic
            .at(&file.path, span)
            .label("the kernel directory, relative to this file"),
        None => diagnostic,
    }
}

/// The located diagnostics of one kernel variant that is not available:
/// the assembler's errors in the kernel sources, or what was looked for.
fn kernel_error_diagnostics(error: &KernelBuildError, kernel_dir: &Utf8Path) -> Vec<Diagnostic> {
    match error {
        KernelBuildError::Compile { diagnostics, .. } => diagnostics.clone(),
        KernelBuildError::UnknownVariant(_) => vec![Diagnostic::error(error.to_string())
            .note(format!("kernel sources are looked for in `{kernel_dir}`"))],
        KernelBuildError::MissingField { file, .. } => {
            vec![Diagnostic::error(error.to_string()).at(file, 0..0)]
        }
    }
}
