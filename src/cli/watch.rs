//! `ipub watch`: rebuild projects whenever a file they read changes.
//!
//! The watcher observes the directories of every file the database has read
//! (not the files themselves), so an editor's save-by-rename, a new file
//! appearing where an include pointed, and a deletion are all seen. A
//! watched directory that is deleted or renamed loses its watch; it is
//! watched again once a directory is back at its path (a branch switch),
//! and files read as missing are looked at after every batch of events, so
//! watch reads what a fresh build would. Events are debounced; then each
//! changed file's input is refreshed (only when its contents really
//! changed) and every project is rebuilt through the same salsa database,
//! so a rebuild recomputes only what the change touched.

use crate::cli::build::{build, explain_build, finished_message, report_outcome, Outcome};
use crate::cli::message::{Message, RebuildFinished};
use crate::cli::output::{self, MessageArgs};
use crate::cli::stamp::{package_path, toml_keys_changed, Change, ChangeKind, Stamp, DEFAULT_OUT};
use crate::db::{Database, Db};
use camino::{Utf8Path, Utf8PathBuf};
use notify::{RecursiveMode, Watcher};
use std::collections::BTreeSet;
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[derive(Debug, clap::Args)]
pub struct WatchArgs {
    /// Projects to keep built.
    #[arg(required = true, value_name = "PROJECT.toml")]
    pub projects: Vec<Utf8PathBuf>,
    /// Quiet time after the last change before rebuilding, in milliseconds.
    #[arg(long, default_value_t = 100, value_name = "MS")]
    pub debounce: u64,
    /// Where the packages go (default `target/ipub/<project>`).
    #[arg(long, value_name = "DIR")]
    pub out: Option<Utf8PathBuf>,
    /// After each good build, run the package on the model and check its
    /// numerics.
    #[arg(long)]
    pub run: bool,
    /// After each rebuild, list what was recomputed and why.
    #[arg(long)]
    pub explain: bool,
    /// Stop after this many rebuilds (for scripts and tests).
    #[arg(long, hide = true)]
    pub max_rebuilds: Option<u64>,
    #[command(flatten)]
    pub message: MessageArgs,
    #[command(flatten)]
    pub remote: crate::cli::remote::RemoteArgs,
}

/// A watched project and the last package written for it.
struct Watched {
    path: Utf8PathBuf,
    file: crate::db::SourceFile,
    written: Option<std::sync::Arc<crate::package::file::Encoded>>,
}

impl Watched {
    /// Builds, and writes the package when its bytes changed, with its
    /// build stamp ([`keep_package_at`]). A failed build writes nothing, so
    /// the last good package stays in place.
    fn rebuild(&mut self, db: &Database, args: &WatchArgs) -> Outcome {
        let started = Instant::now();
        let outcome = build(db, self.file, false);
        let errors = report_outcome(db, self.file, &outcome);
        let path = package_path(args.out.as_deref(), &outcome.name);
        let finished = |package| finished_message(&self.path, &outcome, errors, package, started);
        let Some(bytes) = outcome.package.clone().filter(|_| outcome.ok) else {
            finished(None);
            return outcome;
        };
        let out = args.out.as_deref().unwrap_or(Utf8Path::new(DEFAULT_OUT));
        match keep_package_at(db, &self.path, out, &path, &outcome, self.written.as_ref()) {
            Ok(false) => finished(Some(&path)),
            Ok(true) => {
                output::result_line(format!("wrote {path}"));
                finished(Some(&path));
                self.written = Some(bytes);
                if args.run {
                    run_written(&path);
                }
            }
            Err(error) => {
                output::error(format!("cannot write the package {path}: {error}"));
                finished(None);
            }
        }
        outcome
    }
}

/// After a good rebuild of `project` in a long-lived process (`ipub
/// watch`, `ipub lsp`): writes its package to `path` unless `written` (the
/// last package the process wrote there) holds the same bytes and the file
/// is still there, and saves the build stamp a build into `out` looks for,
/// so that `ipub build` or `ipub run` in another process finds the package
/// up to date instead of building it again. Returns whether it wrote. A
/// rebuild that recomputed nothing and wrote nothing leaves the last stamp
/// as it is; a package left in place is stamped without its file's
/// identity, so the next build reads it back and compares its hash before
/// trusting it. Having stamped, it evicts the caches to their budgets, as
/// `ipub build` does: a long-lived process rebuilding after every edit is
/// what fills them.
pub(crate) fn keep_package_at(
    db: &Database,
    project: &Utf8Path,
    out: &Utf8Path,
    path: &Utf8Path,
    outcome: &Outcome,
    written: Option<&std::sync::Arc<crate::package::file::Encoded>>,
) -> Result<bool, crate::package::PackageError> {
    let Some(bytes) = outcome.package.as_ref().filter(|_| outcome.ok) else {
        return Ok(false);
    };
    let unchanged = written.is_some_and(|w| std::sync::Arc::ptr_eq(w, bytes) || **w == **bytes)
        && path.exists();
    if unchanged && outcome.recomputed == 0 {
        return Ok(false);
    }
    if !unchanged {
        bytes.write(path)?;
    }
    let mut stamp = Stamp::record(db, path, bytes);
    if unchanged {
        stamp.package_file = None;
    }
    let store = crate::store::Store::default_location();
    stamp.save(&store, project, out, bytes);
    crate::cli::build::evict_to_budgets(&store);
    Ok(!unchanged)
}

/// [`keep_package_at`] for a build into `out` (the default output
/// directory when `None`), as `ipub watch` keeps each rebuild's package:
/// for the benches, which rebuild the way watch does.
pub fn keep_package(
    db: &Database,
    project: &Utf8Path,
    out: Option<&Utf8Path>,
    outcome: &Outcome,
    written: Option<&std::sync::Arc<crate::package::file::Encoded>>,
) -> Result<bool, crate::package::PackageError> {
    let path = package_path(out, &outcome.name);
    let out = out.unwrap_or(Utf8Path::new(DEFAULT_OUT));
    keep_package_at(db, project, out, &path, outcome, written)
}

/// Runs a written package on the model and checks its numerics.
fn run_written(path: &Utf8Path) {
    let out = path
        .parent()
        .map_or_else(|| Utf8PathBuf::from("."), Utf8Path::to_owned);
    let result = crate::package::file::read(path)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .and_then(|package| crate::cli::run::run_package(&package, &out, None, path));
    match result {
        Ok(0) => {}
        Ok(_) => output::error(format!("{path} failed its numerics (see above)")),
        Err(error) => output::error(format!("running {path}: {error}")),
    }
}

pub fn run(args: &WatchArgs) -> anyhow::Result<i32> {
    output::set_format(args.message.message_format);
    let _remote = args.remote.install()?;
    let mut db = Database::on_disk();
    // Paths as typed (`./dir/p.toml`) are normalized the way includes are,
    // so every file has one name in the database and in the watcher.
    let mut projects: Vec<Watched> = args
        .projects
        .iter()
        .map(|p| {
            let path = crate::vfs::normalize(p);
            Watched {
                file: db.file(&path),
                path,
                written: None,
            }
        })
        .collect();
    for project in &mut projects {
        let started = Instant::now();
        let outcome = project.rebuild(&db, args);
        output::result_line(format!(
            "built {} in {:.1} ms{}",
            project.path,
            started.elapsed().as_secs_f64() * 1000.0,
            if outcome.ok { "" } else { " with errors" }
        ));
    }
    let (sender, events) = mpsc::channel();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if let Ok(event) = event {
            let _ = sender.send(event.paths);
        }
    })?;
    let mut watched = BTreeSet::new();
    arm(&db, &mut watcher, &mut watched);
    output::result_line(format!(
        "watching {} directories; press Ctrl-C to stop",
        watched.len()
    ));

    let mut rebuilds = 0u64;
    let debounce = Duration::from_millis(args.debounce);
    while let Ok(first) = events.recv() {
        let mut paths: BTreeSet<Utf8PathBuf> = BTreeSet::new();
        collect(&mut paths, first);
        let deadline = Instant::now() + debounce;
        while let Ok(more) = events.recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            collect(&mut paths, more);
        }
        let started = Instant::now();
        // A watched directory that was deleted or renamed lost its watch:
        // it is watched again once a directory is back at its path (or its
        // nearest existing ancestor until then), and the files in it are
        // looked at, since no event names them.
        let lost = forget(&mut watcher, &mut watched, &paths);
        // A directory that appeared (where a missing include points) is
        // watched from now on, and the files expected in it are looked at
        // now, since they may have been written before it was watched.
        let armed = arm(&db, &mut watcher, &mut watched);
        let rewatched: BTreeSet<Utf8PathBuf> = lost.union(&armed).cloned().collect();
        let mut changes = Vec::new();
        for path in affected(&db, &paths, &rewatched) {
            let before = db.file(&path).contents(&db).clone().ok();
            if db.refresh_file(&path) {
                let after = db.file(&path).contents(&db).clone().ok();
                changes.push(change_of(path, before.as_deref(), after.as_deref()));
            }
        }
        if changes.is_empty() {
            continue;
        }
        let names: Vec<String> = changes.iter().map(ToString::to_string).collect();
        let (mut ok, mut queries) = (true, 0);
        let mut outcomes = Vec::new();
        for project in &mut projects {
            let outcome = project.rebuild(&db, args);
            ok &= outcome.ok;
            queries += outcome.recomputed;
            outcomes.push(outcome);
        }
        let mut report = String::new();
        if args.explain {
            // A kernel both projects run is compiled during the first one's
            // rebuild; the second still re-emits its tiles because of it.
            let kernels: Vec<(&'static str, String)> = outcomes
                .iter()
                .flat_map(|o| o.computed.iter())
                .filter(|(phase, _)| *phase == "kernels")
                .cloned()
                .collect();
            for (project, outcome) in projects.iter().zip(&mut outcomes) {
                if !outcome.ok {
                    continue;
                }
                for kernel in &kernels {
                    if !outcome.computed.contains(kernel) {
                        outcome.computed.push(kernel.clone());
                    }
                }
                let reads = project_inputs(&db, project.file);
                let own: Vec<Change> = changes
                    .iter()
                    .filter(|c| reads.contains(&crate::vfs::absolute(&c.path)))
                    .cloned()
                    .collect();
                report.push_str(&explain_build(
                    &db,
                    project.file,
                    &own,
                    outcome,
                    false,
                    false,
                ));
            }
        }
        let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
        output::result_line(format!(
            "rebuilt after change to {} in {elapsed_ms:.1} ms ({queries} queries recomputed){}",
            names.join("; "),
            if ok {
                ""
            } else {
                "; errors above, last good package kept"
            }
        ));
        output::message(&Message::RebuildFinished(RebuildFinished {
            changes: &names,
            success: ok,
            recomputed: queries,
            elapsed_ms,
        }));
        output::text(&report);
        arm(&db, &mut watcher, &mut watched);
        rebuilds += 1;
        if args.max_rebuilds.is_some_and(|max| rebuilds >= max) {
            break;
        }
    }
    if let Some(store) = db.store() {
        store.flush();
    }
    Ok(0)
}

/// Every file a project's build reads (absolute): its TOML files and the
/// sources of the kernels it runs.
fn project_inputs(db: &Database, project: crate::db::SourceFile) -> BTreeSet<Utf8PathBuf> {
    let mut files: BTreeSet<Utf8PathBuf> = crate::project::project_graph(db, project)
        .files
        .iter()
        .map(|f| crate::vfs::absolute(f))
        .collect();
    if let Ok(kernels) = crate::pipeline::project_kernels(db, project) {
        files.extend(
            kernels
                .values()
                .flat_map(|k| &k.sources)
                .map(|f| crate::vfs::absolute(f)),
        );
    }
    files
}

/// How a file changed, with the TOML keys an edit touched.
fn change_of(path: Utf8PathBuf, before: Option<&str>, after: Option<&str>) -> Change {
    let what = match (before, after) {
        (None, _) => ChangeKind::Created,
        (Some(_), None) => ChangeKind::Deleted,
        (Some(old), Some(new)) => ChangeKind::Edited {
            keys: if path.extension() == Some("toml") {
                toml_keys_changed(old, new)
            } else {
                Vec::new()
            },
        },
    };
    Change { path, what }
}

/// Adds the paths of an event, absolute and normalized.
fn collect(paths: &mut BTreeSet<Utf8PathBuf>, event_paths: Vec<std::path::PathBuf>) {
    for path in event_paths {
        if let Ok(path) = Utf8PathBuf::from_path_buf(path) {
            paths.insert(crate::vfs::absolute(&path));
        }
    }
}

/// The database's files an event batch may have changed: those at the
/// event's paths, those in directories whose watch was lost or placed only
/// now (`rewatched`), and those read as missing, which are cheap to look
/// at again and must not stay "not found" once they are back.
fn affected(
    db: &Database,
    events: &BTreeSet<Utf8PathBuf>,
    rewatched: &BTreeSet<Utf8PathBuf>,
) -> Vec<Utf8PathBuf> {
    let unread: BTreeSet<Utf8PathBuf> = db.unread_files().into_iter().collect();
    db.known_files()
        .into_iter()
        .filter(|known| {
            let absolute = crate::vfs::absolute(known);
            events.contains(&absolute)
                || absolute.parent().is_some_and(|dir| rewatched.contains(dir))
                || unread.contains(known)
        })
        .collect()
}

/// Drops the watches that no longer watch their path: those on a
/// directory an event named, or below one (deleted, renamed away, or
/// renamed back: the watcher drops a directory's watch when it is moved
/// or deleted, and a watch that survives follows the directory to its new
/// name), and those on a path that is no longer a directory. Their paths
/// leave `watched`, so [`arm`] watches them again once they exist.
/// Returns the directories dropped (absolute).
fn forget(
    watcher: &mut impl Watcher,
    watched: &mut BTreeSet<Utf8PathBuf>,
    events: &BTreeSet<Utf8PathBuf>,
) -> BTreeSet<Utf8PathBuf> {
    let lost: BTreeSet<Utf8PathBuf> = watched
        .iter()
        .filter(|dir| !dir.is_dir() || events.iter().any(|path| dir.starts_with(path)))
        .cloned()
        .collect();
    for dir in &lost {
        // The watcher may have dropped it already; either way it is gone.
        let _ = watcher.unwatch(dir.as_std_path());
        watched.remove(dir);
    }
    lost
}

/// Watches the directory of every file read so far (once each), or, for a
/// file whose directory does not exist yet, the nearest ancestor that does,
/// so its creation is seen and the directory watched then. Returns the
/// directories newly watched (absolute).
fn arm(
    db: &Database,
    watcher: &mut impl Watcher,
    watched: &mut BTreeSet<Utf8PathBuf>,
) -> BTreeSet<Utf8PathBuf> {
    let mut armed = BTreeSet::new();
    for file in db.known_files() {
        let file = crate::vfs::absolute(&file);
        let Some(mut directory) = file.parent().map(Utf8Path::to_owned) else {
            continue;
        };
        while !directory.is_dir() {
            match directory.parent() {
                Some(parent) => directory = parent.to_owned(),
                None => break,
            }
        }
        if watched.contains(&directory) {
            continue;
        }
        match watcher.watch(directory.as_std_path(), RecursiveMode::NonRecursive) {
            Ok(()) => {
                watched.insert(directory.clone());
                armed.insert(directory);
            }
            Err(error) => tracing::warn!(%directory, %error, "cannot watch directory"),
        }
    }
    armed
}
