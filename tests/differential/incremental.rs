//! Incremental equals clean: a seeded edit sequence over a copy of a
//! shipped project and the kernel sources, built after every edit:
//!
//! - incrementally: one database and one result store across the sequence,
//!   each edited file refreshed as `ipub watch` refreshes it;
//! - as a fresh process would: a new database over the same store, so
//!   persisted plans, tile images and kernels are reused;
//! - clean: a new database with nothing cached;
//!
//! and the package bytes (or the errors of a broken state) must be equal.
//! The same comparison runs through `ipub watch` and fresh `ipub build`
//! processes for a shorter sequence.
//!
//! The fixed slice runs in `cargo test`; the long run is
//! `IPUB_EDIT_COUNT=200 cargo test --release --test differential incremental`
//! (edits per project, every shipped project at full size; `IPUB_EDIT_SEED`
//! picks the seeds, `IPUB_EDIT_PROJECTS=a,b` the projects).

use crate::edits::{self, Edit, Editor, Tree};
use crate::support::{self, Built};
use camino::Utf8Path;
use ipub::db::{Database, Db, SourceFile};
use ipub::vfs::MemoryFs;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

/// A copy of a shipped project: its files and the kernel sources.
pub struct Shipped {
    pub name: &'static str,
    pub root: String,
    pub tree: Tree,
}

/// The shipped project `name` (`projects/NAME.toml`, or a test project of
/// `tests/data/dumps/`), with its includes and the kernel sources, as a tree
/// rooted where `projects/` and `device/` sit side by side.
pub fn shipped(name: &'static str) -> Shipped {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut tree: Tree = support::kernel_sources().into_iter().collect();
    let root = format!("projects/{name}.toml");
    let source = crate_dir.join(&root);
    let text = if source.exists() {
        std::fs::read_to_string(&source).expect("project")
    } else {
        std::fs::read_to_string(crate_dir.join(format!("tests/data/dumps/{name}.toml")))
            .expect("test project")
            .replace("kernels = \"../../../device\"", "kernels = \"../device\"")
    };
    for include in ["layers/vit-encoder.toml"] {
        if text.contains(include) {
            let included =
                std::fs::read_to_string(crate_dir.join("projects").join(include)).expect("include");
            tree.insert(format!("projects/{include}"), included);
        }
    }
    tree.insert(root.clone(), text);
    Shipped { name, root, tree }
}

impl Shipped {
    /// The same project made small: every dimension `from` in a shape
    /// becomes `to`, and the tiles `tiles`, so a sequence builds quickly.
    pub fn shrunk(mut self, from: i64, to: i64, tiles: u32) -> Shipped {
        for (path, text) in self.tree.iter_mut() {
            if path.ends_with(".toml") {
                *text = text
                    .lines()
                    .map(|l| {
                        if l.starts_with("shape = [") {
                            l.replace(&from.to_string(), &to.to_string())
                        } else if l.starts_with("tiles = ") {
                            format!("tiles = {tiles}")
                        } else {
                            l.to_string()
                        }
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
                    + "\n";
            }
        }
        self
    }
}

/// The incremental side: one database over an in-memory tree, with a
/// persistent store and kernel cache in a temporary directory.
pub struct Incremental {
    pub fs: MemoryFs,
    pub db: Database,
    pub file: SourceFile,
    store: ipub::store::Store,
    kernels: ipub::kernels::cache::KernelCache,
    _dir: tempfile::TempDir,
}

impl Incremental {
    pub fn new(tree: &Tree, root: &str) -> Incremental {
        let dir = tempfile::tempdir().expect("temporary directory");
        let base = Utf8Path::from_path(dir.path()).expect("utf-8").to_owned();
        let store = ipub::store::Store::new(base.join("store"));
        let kernels = ipub::kernels::cache::KernelCache::new(base.join("kernels"));
        let fs = MemoryFs::new();
        for (path, text) in tree {
            fs.write(path.as_str(), text);
        }
        let db = Database::new(Arc::new(fs.clone()))
            .with_store(store.clone())
            .with_kernel_cache(kernels.clone());
        let file = db.file(Utf8Path::new(root));
        Incremental {
            fs,
            db,
            file,
            store,
            kernels,
            _dir: dir,
        }
    }

    /// Writes what `edit` changed and refreshes those files, as the watcher
    /// does after its quiet period.
    pub fn apply(&mut self, tree: &Tree, edit: &Edit) {
        for path in &edit.paths {
            match tree.get(path) {
                Some(text) => self.fs.write(path.as_str(), text),
                None => self.fs.remove(Utf8Path::new(path)),
            }
        }
        for path in &edit.paths {
            self.db.refresh_file(Utf8Path::new(path));
        }
    }

    pub fn build(&self) -> Built {
        let built = support::build(&self.db, self.file);
        // A process flushes the store before it exits; the next build in
        // a fresh process must find what this one saved.
        self.store.flush();
        built
    }

    /// A build as a new process would do it: a new database over the same
    /// store and kernel cache.
    pub fn build_fresh(&self, root: &str) -> Built {
        let db = Database::new(Arc::new(self.fs.clone()))
            .with_store(self.store.clone())
            .with_kernel_cache(self.kernels.clone());
        let file = db.file(Utf8Path::new(root));
        let built = support::build(&db, file);
        self.store.flush();
        built
    }
}

/// A clean build of `tree`: a new database, no store, no kernel cache.
pub fn clean_build(tree: &Tree, root: &str) -> Built {
    let fs = MemoryFs::new();
    for (path, text) in tree {
        fs.write(path.as_str(), text);
    }
    let db = support::clean_database(&fs);
    let file = db.file(Utf8Path::new(root));
    support::build(&db, file)
}

/// What a sequence compared.
#[derive(Default, Debug)]
pub struct Counts {
    pub edits: usize,
    /// States that built, and how many different packages they gave.
    pub packages: usize,
    pub distinct: std::collections::BTreeSet<[u8; 32]>,
    /// States with errors (equal errors on every side).
    pub broken: usize,
}

/// Runs `steps` edits of `project` from `seed`, comparing the three kinds
/// of build after each; the error names the seed, the edits and the
/// difference.
pub fn check_sequence(project: &Shipped, seed: u64, steps: usize) -> Result<Counts, String> {
    let mut tree = project.tree.clone();
    let mut editor = Editor::new(seed, &project.root, &tree, true);
    let mut incremental = Incremental::new(&tree, &project.root);
    let mut counts = Counts::default();
    let mut history = Vec::new();
    let first = incremental.build();
    let clean = clean_build(&tree, &project.root);
    compare(project, seed, &history, &[("incremental", &first)], &clean)?;
    for _ in 0..steps {
        let edit = editor.next(&mut tree);
        history.push(edit.description.clone());
        incremental.apply(&tree, &edit);
        let built = incremental.build();
        let fresh = incremental.build_fresh(&project.root);
        let clean = clean_build(&tree, &project.root);
        compare(
            project,
            seed,
            &history,
            &[("incremental", &built), ("fresh process", &fresh)],
            &clean,
        )
        .map_err(|e| {
            format!(
                "{e}\nchanges since the start:\n{}",
                edits::diff(&project.tree, &tree)
            )
        })?;
        counts.edits += 1;
        editor.built(matches!(clean, Built::Package(_)));
        match &clean {
            Built::Package(bytes) => {
                counts.packages += 1;
                counts.distinct.insert(*blake3::hash(bytes).as_bytes());
            }
            Built::Failed(_) => counts.broken += 1,
        }
    }
    Ok(counts)
}

fn compare(
    project: &Shipped,
    seed: u64,
    history: &[String],
    builds: &[(&str, &Built)],
    clean: &Built,
) -> Result<(), String> {
    let mut out = String::new();
    for (kind, built) in builds {
        if *built != clean {
            let _ = writeln!(
                out,
                "{kind} build differs from the clean build\n  {kind}: {}\n  clean: {}{}",
                built.summary(),
                clean.summary(),
                first_difference(built, clean)
            );
        }
    }
    if out.is_empty() {
        return Ok(());
    }
    let steps: Vec<String> = history
        .iter()
        .enumerate()
        .map(|(i, e)| format!("  {}. {e}", i + 1))
        .collect();
    Err(format!(
        "{} (edit seed {seed}), after edit {}:\n{out}edits:\n{}",
        project.name,
        history.len(),
        steps.join("\n")
    ))
}

fn first_difference(a: &Built, b: &Built) -> String {
    let (Built::Package(a), Built::Package(b)) = (a, b) else {
        return String::new();
    };
    let at = a
        .iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    format!("\n  first differing byte at offset {at}")
}

/// The fixed slice: small copies of the shipped projects, a dozen edits
/// each.
fn fixed_slice() -> Vec<(Shipped, u64, usize)> {
    vec![
        (shipped("matmul-f8"), 1, 16),
        (shipped("mixed-f8"), 2, 12),
        (shipped("fp8-repeat"), 3, 16),
        (shipped("vit-fp8").shrunk(197, 17, 16), 4, 10),
    ]
}

#[test]
fn incremental_builds_equal_clean_builds_along_random_edits() {
    let sequences = match support::env_count("IPUB_EDIT_COUNT") {
        Some(count) => {
            let seed = support::env_count("IPUB_EDIT_SEED").unwrap_or(0);
            let only = std::env::var("IPUB_EDIT_PROJECTS").unwrap_or_default();
            [
                "matmul-f8",
                "mixed-f8",
                "fp8-repeat",
                "mlp-f16",
                "attention-f16",
                "vit-fp8",
            ]
            .into_iter()
            .enumerate()
            .filter(|(_, name)| only.is_empty() || only.split(',').any(|o| o == *name))
            .map(|(i, name)| (shipped(name), seed + i as u64, count as usize))
            .collect()
        }
        None => fixed_slice(),
    };
    let mut failures = Vec::new();
    for (project, seed, steps) in &sequences {
        let started = std::time::Instant::now();
        match check_sequence(project, *seed, *steps) {
            Ok(counts) => println!(
                "{}: {} edits, {} packages ({} distinct) and {} broken states equal ({:.1} s)",
                project.name,
                counts.edits,
                counts.packages,
                counts.distinct.len(),
                counts.broken,
                started.elapsed().as_secs_f64()
            ),
            Err(error) => failures.push(error),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
