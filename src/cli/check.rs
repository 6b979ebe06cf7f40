//! `ipub check`: validate projects and print their diagnostics.
//!
//! Besides the project's own errors and warnings, `check` looks at what
//! only the driver can see: that the kernel directory exists. With `--fit`
//! it also runs the compiler up to placement, so a project that does not
//! fit its tiles (or whose kernels do not assemble) fails the check.

use super::message::{CheckFinished, GraphSummary, Message};
use super::output::{self, MessageArgs};
use crate::db::{Database, Db, SourceFile};
use crate::diagnostic::Diagnostic;
use camino::{Utf8Path, Utf8PathBuf};

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Project files to validate.
    #[arg(required = true, value_name = "PROJECT.toml")]
    pub projects: Vec<Utf8PathBuf>,
    /// Also plan, lower and place the project (and assemble its kernels):
    /// a project that does not fit its tiles fails the check.
    #[arg(long)]
    pub fit: bool,
    #[command(flatten)]
    pub message: MessageArgs,
}

/// Validates every project; exit code 1 when any has an error.
pub fn run(args: &CheckArgs) -> anyhow::Result<i32> {
    output::set_format(args.message.message_format);
    let db = Database::on_disk();
    let mut failed = false;
    for path in &args.projects {
        failed |= !check_project(&db, path, args.fit);
    }
    if let Some(store) = db.store() {
        store.flush();
    }
    Ok(i32::from(failed))
}

/// Checks one project, printing its diagnostics and summary; returns
/// whether it passed.
fn check_project(db: &Database, path: &Utf8Path, fit: bool) -> bool {
    let file = db.file(path);
    let result = crate::project::project_graph(db, file);
    let mut diagnostics = result.diagnostics.clone();
    if result.graph.is_some() {
        diagnostics.extend(kernel_dir_diagnostic(db, file, &result.kernel_dir));
    }
    let mut fits = None;
    if fit && !diagnostics.iter().any(Diagnostic::is_error) {
        let placed = crate::pipeline::placement(db, file).clone();
        fits = Some(placed.is_ok());
        if let Err(error) = placed {
            diagnostics.extend(super::located::build_error_diagnostics(db, file, &error));
        }
    }
    let warnings = crate::project::project_warnings(db, file);
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
    output::diagnostics(db, path, &diagnostics);
    output::diagnostics(db, path, &warnings);
    let graph = result.graph.as_ref().filter(|_| errors == 0);
    output::message(&Message::CheckFinished(CheckFinished {
        project: path.as_str(),
        success: graph.is_some(),
        errors,
        warnings: warnings.len(),
        graph: graph.map(|g| GraphSummary::of(g)),
        fits,
    }));
    match graph {
        Some(graph) => {
            let warned = match warnings.len() {
                0 => String::new(),
                n => format!("; {}", output::count(n, "warning")),
            };
            let placed = if fits == Some(true) { ", fits" } else { "" };
            output::result_line(format!(
                "checked {path}: project {} ({} tensors, {} ops, {} repeats, {} tiles{placed}){warned}",
                graph.name,
                graph.tensors.len(),
                graph.ops.len(),
                graph.repeats.len(),
                graph.tiles
            ));
            true
        }
        None => {
            if !output::is_json() {
                let what = if fits == Some(false) {
                    format!("`{path}` does not build")
                } else {
                    format!("could not validate `{path}`")
                };
                output::error(format!(
                    "{what} due to {} previous error{}",
                    errors,
                    if errors == 1 { "" } else { "s" }
                ));
            }
            false
        }
    }
}

/// An error when the default kernel directory (`kernels` not set) does
/// not exist. A directory the project names is checked by validation.
fn kernel_dir_diagnostic(
    db: &Database,
    file: SourceFile,
    kernel_dir: &Utf8Path,
) -> Option<Diagnostic> {
    if kernel_dir.is_dir() {
        return None;
    }
    let diagnostic = Diagnostic::error(format!("kernel directory `{kernel_dir}` does not exist"))
        .code("kernel-directory");
    let loaded = crate::project::loaded_files(db, file);
    let root = loaded.files.iter().find(|f| f.is_root)?;
    let project = root.ast.project.as_ref()?;
    if project.get_ref().kernels.is_some() {
        return None;
    }
    Some(
        diagnostic
            .at(&root.path, project.span())
            .note(format!(
                "without `kernels`, kernel sources are looked for in `{}` next to the project file",
                crate::project::DEFAULT_KERNEL_DIR
            ))
            .help("set `kernels = \"DIR\"` in [project]"),
    )
}
