//! `ipub check`: validate projects and print their diagnostics.

use crate::db::{Database, Db};
use crate::diagnostic::{render, Diagnostic};
use camino::{Utf8Path, Utf8PathBuf};

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Project files to validate.
    #[arg(required = true, value_name = "PROJECT.toml")]
    pub projects: Vec<Utf8PathBuf>,
}

/// Validates every project; exit code 1 when any has an error.
pub fn run(args: &CheckArgs) -> anyhow::Result<i32> {
    let db = Database::on_disk();
    let mut failed = false;
    for path in &args.projects {
        let result = crate::project::project_graph(&db, db.file(path));
        print_diagnostics(&db, &result.diagnostics);
        match &result.graph {
            Some(graph) => println!(
                "checked {path}: project {} ({} tensors, {} ops, {} repeats, {} tiles)",
                graph.name,
                graph.tensors.len(),
                graph.ops.len(),
                graph.repeats.len(),
                graph.tiles
            ),
            None => {
                failed = true;
                let errors = result.diagnostics.iter().filter(|d| d.is_error()).count();
                eprintln!(
                    "error: could not validate `{path}` due to {errors} previous error{}",
                    if errors == 1 { "" } else { "s" }
                );
            }
        }
    }
    Ok(i32::from(failed))
}

/// Renders diagnostics to stderr with the files' current contents.
pub fn print_diagnostics(db: &Database, diagnostics: &[Diagnostic]) {
    for diagnostic in diagnostics {
        eprintln!(
            "{}",
            render(diagnostic, &|path: &Utf8Path| {
                db.file(path)
                    .contents(db)
                    .as_deref()
                    .ok()
                    .map(str::to_string)
            })
        );
    }
}
