//! The language server's state: the database over the editor's overlay,
//! the projects found in the workspace, what each last built, and the
//! queries the request handlers share (a file's text, its projects, their
//! kernel directory).

use super::overlay::Overlay;
use super::uri;
use crate::db::{Database, Db, SourceFile};
use crate::diagnostic::Diagnostic;
use camino::{Utf8Path, Utf8PathBuf};
use lsp_types::Uri;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// How deep the workspace is searched for project files.
const SCAN_DEPTH: usize = 4;
/// At most this many files are looked at while searching.
const SCAN_FILES: usize = 5000;

/// A build's diagnostics, each with the text of its file the build read:
/// it is shown only while that text is current.
pub(super) type BuiltDiagnostics = Vec<(Diagnostic, Option<Arc<str>>)>;

/// Everything the server knows.
pub(crate) struct Session {
    pub db: Database,
    pub overlay: Overlay,
    /// Where packages go (`<workspace>/target/ipub/<project>`).
    pub(super) workspace: Option<Utf8PathBuf>,
    /// Root project files: found in the workspace, or opened.
    pub(super) roots: BTreeSet<Utf8PathBuf>,
    /// Open documents and their versions.
    pub(super) versions: HashMap<Utf8PathBuf, i32>,
    /// Diagnostics of each project's last build (placement, kernels).
    pub(super) build_diagnostics: HashMap<Utf8PathBuf, BuiltDiagnostics>,
    /// The package last written for each project.
    pub(super) written: HashMap<Utf8PathBuf, Arc<crate::package::file::Encoded>>,
    /// Files that have diagnostics on the client now.
    pub(super) published: BTreeSet<Utf8PathBuf>,
    /// Each project's files when its root file last parsed, so a root
    /// being typed into (which rarely parses) keeps its includes.
    pub(super) last_files: HashMap<Utf8PathBuf, BTreeSet<Utf8PathBuf>>,
}

impl Session {
    pub(super) fn new(workspace: Option<Utf8PathBuf>) -> Session {
        let overlay = Overlay::default();
        let db = Database::on_disk_with(Arc::new(overlay.clone()));
        let mut session = Session {
            db,
            overlay,
            workspace,
            roots: BTreeSet::new(),
            versions: HashMap::new(),
            build_diagnostics: HashMap::new(),
            written: HashMap::new(),
            published: BTreeSet::new(),
            last_files: HashMap::new(),
        };
        if let Some(workspace) = session.workspace.clone() {
            session.scan(&workspace, 0, &mut 0);
        }
        session
    }

    /// Finds root project files (those with a `[project]` table) under
    /// `dir`, so an included file opened alone finds its project.
    pub(super) fn scan(&mut self, dir: &Utf8Path, depth: usize, seen: &mut usize) {
        let Ok(entries) = dir.read_dir_utf8() else {
            return;
        };
        let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
        entries.sort_by(|a, b| a.file_name().cmp(b.file_name()));
        for entry in entries {
            *seen += 1;
            if *seen > SCAN_FILES {
                return;
            }
            let path = entry.path();
            let name = entry.file_name();
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if is_dir {
                if depth < SCAN_DEPTH && !name.starts_with('.') && name != "target" {
                    self.scan(path, depth + 1, seen);
                }
            } else if path.extension() == Some("toml") {
                if let Ok(text) = std::fs::read_to_string(path) {
                    if is_root(path, &text) {
                        self.roots.insert(path.to_owned());
                    }
                }
            }
        }
    }

    pub(super) fn file(&self, path: &Utf8Path) -> SourceFile {
        self.db.file(path)
    }

    /// The files of a root project: the root, the files it parsed and the
    /// files it includes (parsed or not).
    /// While the root does not parse, the files it had when it last did.
    pub(super) fn project_files(&self, root: &Utf8Path) -> BTreeSet<Utf8PathBuf> {
        let (mut files, _) = self.current_files(root);
        files.extend(self.last_files.get(root).into_iter().flatten().cloned());
        files
    }

    /// The files a root's current text reaches, and whether it parsed.
    pub(super) fn current_files(&self, root: &Utf8Path) -> (BTreeSet<Utf8PathBuf>, bool) {
        let index = crate::project::project_index(&self.db, self.file(root));
        let parsed = index.files.iter().any(|f| f == root);
        let mut files: BTreeSet<Utf8PathBuf> = index.files.into_iter().collect();
        files.extend(index.includes.into_iter().map(|i| i.target));
        files.insert(root.to_owned());
        (files, parsed)
    }

    /// The kernel directory of a root project.
    pub(super) fn kernel_dir(&self, root: &Utf8Path) -> Utf8PathBuf {
        crate::project::project_graph(&self.db, self.file(root))
            .kernel_dir
            .clone()
    }

    /// The root projects `path` belongs to: as a project file, or as a
    /// kernel source under a project's kernel directory.
    pub(super) fn roots_of(&self, path: &Utf8Path) -> Vec<Utf8PathBuf> {
        self.roots
            .iter()
            .filter(|root| {
                if path.extension() == Some("toml") {
                    self.project_files(root).contains(path)
                } else {
                    path.starts_with(self.kernel_dir(root))
                }
            })
            .cloned()
            .collect()
    }

    /// Projects with an open project file (the root or one it includes):
    /// the ones whose programs a kernel source is assembled for, and
    /// rebuilt when it is saved. A kernel source alone opens none of the
    /// projects that share its directory, whose plans and lowering could
    /// take seconds each at full chip.
    pub(super) fn open_projects(&self) -> BTreeSet<Utf8PathBuf> {
        self.versions
            .keys()
            .filter(|path| path.extension() == Some("toml"))
            .flat_map(|path| self.roots_of(path))
            .collect()
    }

    /// The open projects (see [`Session::open_projects`]) `path` belongs
    /// to, for a kernel source; every project it belongs to for a project
    /// file.
    pub(super) fn open_roots_of(&self, path: &Utf8Path) -> Vec<Utf8PathBuf> {
        let roots = self.roots_of(path);
        if path.extension() == Some("toml") {
            return roots;
        }
        let open = self.open_projects();
        roots
            .into_iter()
            .filter(|root| open.contains(root))
            .collect()
    }

    /// Projects with an open file: the ones whose diagnostics are shown.
    pub(super) fn active_roots(&self) -> BTreeSet<Utf8PathBuf> {
        self.versions
            .keys()
            .flat_map(|path| self.roots_of(path))
            .collect()
    }

    /// A file's current text (the editor's when open).
    pub(super) fn text(&self, path: &Utf8Path) -> Option<Arc<str>> {
        self.file(path).contents(&self.db).clone().ok()
    }

    /// The first root project `path` belongs to.
    pub(super) fn root_of(&self, path: &Utf8Path) -> Option<Utf8PathBuf> {
        if self.roots.contains(path) {
            return Some(path.to_owned());
        }
        self.roots_of(path).into_iter().next()
    }

    /// The path and text of a document the client names.
    pub(super) fn document(&self, uri: &Uri) -> Option<(Utf8PathBuf, Arc<str>)> {
        let path = uri::path_of(uri)?;
        let text = self.text(&path)?;
        Some((path, text))
    }
}

/// Files whose `[project]` table is another tool's: Python's
/// `pyproject.toml`.
const OTHER_PROJECTS: &[&str] = &["pyproject.toml"];

/// Whether `path` with `text` is a root project: a TOML file with a
/// `[project]` table, other than another tool's project file.
pub(super) fn is_root(path: &Utf8Path, text: &str) -> bool {
    is_ours(path) && headers(text).any(|header| header == "[project]")
}

/// Whether `path` may be a project file: TOML, and not another tool's
/// project file.
fn is_ours(path: &Utf8Path) -> bool {
    path.extension() == Some("toml")
        && !path
            .file_name()
            .is_some_and(|name| OTHER_PROJECTS.contains(&name))
}

/// Whether a TOML file is written in the project format, so that a file
/// no project includes is still checked on its own: it has a table of
/// the format (`[project]`, `[[tensor]]`, `[[op]]`, `[[repeat]]`,
/// `[check]`) or a top-level `include`. Other TOML files (`Cargo.toml`,
/// `.taplo.toml`, `rustfmt.toml`) would get nothing but errors.
pub(super) fn is_project_file(path: &Utf8Path, text: &str) -> bool {
    if !is_ours(path) {
        return false;
    }
    const TABLES: &[&str] = &["[project]", "[[tensor]]", "[[op]]", "[[repeat]]", "[check]"];
    let top_level_include = text
        .lines()
        .map(uncommented)
        .take_while(|line| !line.starts_with('['))
        .any(|line| {
            line.strip_prefix("include")
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        });
    top_level_include || headers(text).any(|header| TABLES.contains(&header))
}

/// The table headers of a TOML text, as written (`[project]`).
fn headers(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .map(uncommented)
        .filter(|line| line.starts_with('['))
}

/// A line without its comment and surrounding blanks (a `#` in a string
/// is taken for a comment: headers and keys have none).
fn uncommented(line: &str) -> &str {
    line.split('#').next().unwrap_or_default().trim()
}
