//! Projects: TOML files (and the files they include) to a validated
//! [`Graph`] with diagnostics.
//!
//! The format is documented in `book/src/project-format.md`. Three layers:
//! [`syntax`] (serde structures with spans; unknown keys are errors),
//! [`load`] (the root file and its includes), [`validate`] (names,
//! dependency order, shape and dtype rules in [`shapes`]).
//!
//! [`project_graph`] is the salsa query the rest of the pipeline starts from.
//! Its result holds no spans when the project is valid, so an edit that only
//! moves text (a comment, whitespace) produces an equal result and nothing
//! downstream re-runs.

pub(crate) mod index;
pub(crate) mod limits;
pub(crate) mod lints;
pub(crate) mod load;
pub mod schema;
pub(crate) mod scope;
pub mod shapes;
pub(crate) mod softmax_mask;
pub(crate) mod syntax;
pub(crate) mod validate;

use crate::db::{Db, SourceFile};
use crate::diagnostic::Diagnostic;
use crate::graph::Graph;
use camino::{Utf8Path, Utf8PathBuf};
use std::ops::Range;
use std::sync::Arc;

/// A file being validated, for making located diagnostics.
pub(crate) struct Site<'a> {
    pub path: &'a Utf8Path,
}

impl Site<'_> {
    pub(crate) fn error(&self, message: impl Into<String>, span: Range<usize>) -> Diagnostic {
        Diagnostic::error(message).at(self.path, span)
    }
}

/// What validating a project produced.
#[derive(Clone, Debug, PartialEq)]
pub struct ProjectResult {
    /// Present when there are no errors.
    pub graph: Option<Arc<Graph>>,
    pub diagnostics: Vec<Diagnostic>,
    /// Every file read: the root and its includes (for watchers).
    pub files: Vec<Utf8PathBuf>,
    /// Where the project's kernel sources are: `[project] kernels`
    /// (default `../device`), relative to the root file.
    pub kernel_dir: Utf8PathBuf,
}

/// The kernel directory when `[project] kernels` is not given.
pub(crate) const DEFAULT_KERNEL_DIR: &str = "../device";

/// The validated graph of the project whose root file is `root`.
///
/// One query per project: it reads the root and every included file, so an
/// edit to an include invalidates exactly the projects that include it.
#[salsa::tracked(returns(ref))]
pub fn project_graph(db: &dyn Db, root: SourceFile) -> ProjectResult {
    let read = |path: &Utf8Path| -> crate::db::FileText {
        if path == root.path(db) {
            return root.contents(db).clone();
        }
        db.file(path).contents(db).clone()
    };
    let files = |path: &Utf8Path| crate::data::query::tensor_index(db, db.data_file(path)).clone();
    validate_with(root.path(db), &read, Some(&files))
}

/// The parsed files of the project whose root file is `root`, read through
/// the database (so an editor's unsaved text is what is parsed).
pub(crate) fn loaded_files(db: &dyn Db, root: SourceFile) -> load::Loaded {
    let read = |path: &Utf8Path| -> crate::vfs::FileText {
        if path == root.path(db) {
            return root.contents(db).clone();
        }
        db.file(path).contents(db).clone()
    };
    load::load(root.path(db), &read)
}

/// Where every name, include and op kind of the project is written.
pub(crate) fn project_index(db: &dyn Db, root: SourceFile) -> index::ProjectIndex {
    index::ProjectIndex::of(&loaded_files(db, root))
}

/// The warnings of a valid project ([`lints`]); none when it has errors.
///
/// Not a query: warnings carry positions, and re-parsing a project's few
/// small files costs less than keeping positions in anything memoized.
pub(crate) fn project_warnings(db: &dyn Db, root: SourceFile) -> Vec<Diagnostic> {
    let Some(graph) = project_graph(db, root).graph.clone() else {
        return Vec::new();
    };
    lints::warnings(&project_index(db, root), &graph)
}

/// Warnings about the values of tensors initialised from files (NaNs, and
/// values too large for the tensor's dtype), each at the tensor's name.
/// Not among [`project_warnings`]: only a build converts the values, so
/// a build asks for these once it has (`cli::build`).
pub(crate) fn value_warnings(db: &dyn Db, root: SourceFile) -> Vec<Diagnostic> {
    let Some(graph) = &project_graph(db, root).graph else {
        return Vec::new();
    };
    let index = project_index(db, root);
    // In file order, as the lints are.
    let mut warnings: Vec<(Option<(Utf8PathBuf, usize)>, Diagnostic)> = Vec::new();
    for tensor in &graph.tensors {
        let Some(message) = crate::data::query::value_warning(db, graph, tensor) else {
            continue;
        };
        let repeat = tensor
            .repeat
            .and_then(|r| graph.repeats.get(r as usize))
            .map(|r| r.name.as_str());
        let definition = index.definitions.iter().find(|d| {
            matches!(
                d.kind,
                index::DefinitionKind::Tensor | index::DefinitionKind::BodyTensor
            ) && d.name == tensor.written_name()
                && d.repeat.as_deref() == repeat
        });
        let mut warning = Diagnostic::warning(message)
            .note("they are kept as they are: the outputs they reach can be NaN or infinite, on the device and in the reference alike")
            .help("check the file's values, or give the tensor a dtype (and an FP8 scale) that holds them")
            .code("tensor-file-values");
        if let Some(definition) = definition {
            warning = warning
                .at(&definition.file, definition.name_span.clone())
                .label("its values come from the file");
        }
        let position = definition.map(|d| (d.file.clone(), d.name_span.start));
        warnings.push((position, warning));
    }
    warnings.sort_by(|a, b| a.0.cmp(&b.0));
    warnings.into_iter().map(|(_, warning)| warning).collect()
}

/// Errors and warnings of the project, errors first.
pub(crate) fn project_diagnostics(db: &dyn Db, root: SourceFile) -> Vec<Diagnostic> {
    let mut diagnostics = project_graph(db, root).diagnostics.clone();
    diagnostics.extend(project_warnings(db, root));
    diagnostics
}

/// Validation without salsa (for tools and tests that have the text).
/// Without `tensor_files`, inits from tensor files are checked for their
/// form only (see [`validate::validate`]).
pub fn validate_with(
    root: &Utf8Path,
    read: &load::ReadFile<'_>,
    tensor_files: Option<&validate::TensorFiles<'_>>,
) -> ProjectResult {
    let loaded = load::load(root, read);
    let files = if loaded.files.is_empty() {
        vec![root.to_owned()]
    } else {
        loaded.files.iter().map(|f| f.path.clone()).collect()
    };
    let root_file = loaded.files.iter().find(|f| f.is_root);
    let declared = root_file
        .and_then(|f| f.ast.project.as_ref())
        .and_then(|p| p.get_ref().kernels.as_ref());
    let kernels = declared.map_or(DEFAULT_KERNEL_DIR, |k| k.get_ref().as_str());
    let kernel_dir = load::resolve(root, kernels);
    let (mut graph, mut diagnostics) = validate::validate(&loaded, tensor_files);
    // A `kernels` directory that is not there would only show up as a
    // missing kernel source when the build reaches its kernels.
    if let (Some(file), Some(declared)) = (root_file, declared) {
        let problem = match read(&kernel_dir) {
            Err(e) if e.is_directory() => None,
            Ok(_) => Some("it is a file".to_string()),
            Err(e) => Some(e.to_string()),
        };
        if let Some(problem) = problem {
            diagnostics.push(
                Diagnostic::error(format!(
                    "the kernel directory `{kernel_dir}` is not a directory: {problem}"
                ))
                .at(&file.path, declared.span())
                .label("`kernels` is relative to this file"),
            );
            graph = None;
        }
    }
    ProjectResult {
        graph: graph.map(Arc::new),
        diagnostics,
        files,
        kernel_dir,
    }
}

#[cfg(test)]
mod tests;
