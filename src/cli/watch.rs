//! `ipub watch`: rebuild projects whenever a file they read changes.
//!
//! The watcher observes the directories of every file the database has read
//! (not the files themselves), so an editor's save-by-rename, a new file
//! appearing where an include pointed, and a deletion are all seen. Events
//! are debounced; then each changed file's input is refreshed (only when its
//! contents really changed) and every project is rebuilt through the same
//! salsa database, so a rebuild recomputes only what the change touched.

use crate::cli::build::build;
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
    /// Stop after this many rebuilds (for scripts and tests).
    #[arg(long, hide = true)]
    pub max_rebuilds: Option<u64>,
}

pub fn run(args: &WatchArgs) -> anyhow::Result<i32> {
    let mut db = Database::on_disk();
    let projects: Vec<_> = args
        .projects
        .iter()
        .map(|p| (p.clone(), db.file(p)))
        .collect();
    for (path, file) in &projects {
        let started = Instant::now();
        let outcome = build(&db, *file, false);
        println!(
            "built {path} in {:.1} ms{}",
            started.elapsed().as_secs_f64() * 1000.0,
            if outcome.ok { "" } else { " with errors" }
        );
    }
    let (sender, events) = mpsc::channel();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if let Ok(event) = event {
            let _ = sender.send(event.paths);
        }
    })?;
    let mut watched = BTreeSet::new();
    watch_directories(&db, &mut watcher, &mut watched);
    println!(
        "watching {} directories; press Ctrl-C to stop",
        watched.len()
    );

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
        let known: BTreeSet<Utf8PathBuf> = db.known_files().into_iter().collect();
        let changed: Vec<Utf8PathBuf> = paths
            .into_iter()
            .filter(|p| known.contains(p))
            .filter(|p| db.refresh_file(p))
            .collect();
        if changed.is_empty() {
            continue;
        }
        let names: Vec<String> = changed.iter().map(|p| p.to_string()).collect();
        let (mut ok, mut queries) = (true, 0);
        for (_, file) in &projects {
            let outcome = build(&db, *file, false);
            ok &= outcome.ok;
            queries += outcome.recomputed;
        }
        println!(
            "rebuilt after change to {} in {:.1} ms ({queries} queries recomputed){}",
            names.join(", "),
            started.elapsed().as_secs_f64() * 1000.0,
            if ok {
                ""
            } else {
                "; errors above, last good output kept"
            }
        );
        watch_directories(&db, &mut watcher, &mut watched);
        rebuilds += 1;
        if args.max_rebuilds.is_some_and(|max| rebuilds >= max) {
            break;
        }
    }
    Ok(0)
}

/// Adds the (absolute) paths of an event, matched against the database's
/// paths as the user gave them.
fn collect(paths: &mut BTreeSet<Utf8PathBuf>, event_paths: Vec<std::path::PathBuf>) {
    let cwd = std::env::current_dir().ok();
    for path in event_paths {
        let Ok(path) = Utf8PathBuf::from_path_buf(path) else {
            continue;
        };
        if let Some(relative) = cwd
            .as_ref()
            .and_then(|cwd| path.as_std_path().strip_prefix(cwd).ok())
            .and_then(Utf8Path::from_path)
        {
            paths.insert(relative.to_owned());
        }
        paths.insert(path);
    }
}

/// Watches the directory of every file read so far (once each).
fn watch_directories(
    db: &Database,
    watcher: &mut impl Watcher,
    watched: &mut BTreeSet<Utf8PathBuf>,
) {
    for file in db.known_files() {
        let directory = match file.parent() {
            Some(d) if !d.as_str().is_empty() => d.to_owned(),
            _ => Utf8PathBuf::from("."),
        };
        if watched.contains(&directory) || !directory.exists() {
            continue;
        }
        match watcher.watch(directory.as_std_path(), RecursiveMode::NonRecursive) {
            Ok(()) => {
                watched.insert(directory);
            }
            Err(error) => tracing::warn!(%directory, %error, "cannot watch directory"),
        }
    }
}
