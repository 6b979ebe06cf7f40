//! Incremental equals clean through the real processes: `ipub watch` kept
//! running along a seeded edit sequence, and a fresh `ipub build` (the
//! build stamp, the store) after every edit, both compared with clean
//! in-process builds of the same files.

use crate::edits::{Editor, Tree};
use crate::incremental::{clean_build, shipped, Incremental};
use crate::support::{self, Built};
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

/// A running `ipub watch`, stopped when dropped.
pub struct Watch {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Watch {
    /// Starts `ipub watch ARGS` in `dir` with its cache in `dir/.cache`.
    pub fn start(dir: &Path, args: &[&str]) -> Watch {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ipub"))
            .arg("watch")
            .args(args)
            .args(["--debounce", "50"])
            .current_dir(dir)
            .env("IPUB_CACHE_DIR", dir.join(".cache"))
            .env_remove("RUST_LOG")
            .env_remove("IPUB_LOG")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start ipub watch");
        let (sender, lines) = mpsc::channel();
        for stream in [
            Box::new(child.stdout.take().expect("stdout")) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().expect("stderr")),
        ] {
            let sender = sender.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    let _ = sender.send(line);
                }
            });
        }
        Watch {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// The lines up to one containing `needle`, or an error after
    /// `timeout` with everything the watcher printed.
    pub fn wait_for(&mut self, needle: &str, timeout: Duration) -> Result<Vec<String>, String> {
        let deadline = std::time::Instant::now() + timeout;
        let mut batch = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    let found = line.contains(needle);
                    batch.push(line);
                    if found {
                        return Ok(batch);
                    }
                }
                Err(_) => {
                    return Err(format!(
                        "no `{needle}` from ipub watch within {timeout:?}; it printed:\n{}",
                        self.seen.join("\n")
                    ))
                }
            }
        }
    }
}

impl Watch {
    /// The last lines the watcher printed, for failure reports.
    pub fn printed(&self) -> String {
        let from = self.seen.len().saturating_sub(40);
        self.seen[from..].join("\n")
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes one file as many editors save: to a temporary file beside it,
/// then renamed over it.
pub fn save(path: &Path, text: &str, by_rename: bool) {
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
    if by_rename {
        let temporary = PathBuf::from(format!("{}.swp", path.display()));
        std::fs::write(&temporary, text).expect("write temporary");
        std::fs::rename(&temporary, path).expect("rename over");
    } else {
        std::fs::write(path, text).expect("write");
    }
}

fn package_bytes(path: &Path) -> Option<Vec<u8>> {
    std::fs::read(path).ok()
}

/// Runs `steps` edits of a shipped project under `ipub watch` and a fresh
/// `ipub build` after each.
fn check_watched_sequence(name: &'static str, seed: u64, steps: usize) -> Result<usize, String> {
    let project = shipped(name);
    let dir = tempfile::tempdir().expect("temporary directory");
    let root = project.root.clone();
    let mut tree: Tree = project.tree.clone();
    support::write_tree(dir.path(), &tree);
    let watched_out = dir.path().join("watched");
    let built_out = dir.path().join("built");
    let package_name = format!("{name}.ipuexe");
    // New include files go into existing directories here: a directory
    // created after the watcher started is its own regression test.
    let mut editor = Editor::new(seed, &root, &tree, false);
    let mut mirror = Incremental::new(&tree, &root);
    mirror.build();
    let mut last_good = match clean_build(&tree, &root) {
        Built::Package(bytes) => bytes,
        Built::Failed(errors) => return Err(format!("{name} does not build:\n{errors}")),
    };
    let out = watched_out.to_str().expect("utf-8");
    let mut watch = Watch::start(dir.path(), &[&root, "--out", out]);
    watch.wait_for("watching", Duration::from_secs(120))?;
    let mut history = Vec::new();
    let context = |history: &[String]| {
        format!(
            "{name} (edit seed {seed}), edits:\n  {}",
            history.join("\n  ")
        )
    };
    if package_bytes(&watched_out.join(&package_name)).as_ref() != Some(&last_good) {
        return Err(format!(
            "{name}: the first watched build differs from a clean build"
        ));
    }
    for _ in 0..steps {
        let known: BTreeSet<String> = mirror
            .db
            .known_files()
            .into_iter()
            .map(|p| p.to_string())
            .collect();
        let before = tree.clone();
        let edit = editor.next(&mut tree);
        history.push(edit.description.clone());
        for path in &edit.paths {
            let on_disk = dir.path().join(path);
            match tree.get(path) {
                // Saved whole: a file written in place can be read half
                // written, which the watcher only corrects at the next
                // event, and this sequence counts its rebuilds.
                Some(text) => save(&on_disk, text, true),
                None => {
                    let _ = std::fs::remove_file(&on_disk);
                }
            }
        }
        mirror.apply(&tree, &edit);
        mirror.build();
        let clean = clean_build(&tree, &root);
        editor.built(matches!(clean, Built::Package(_)));
        let changed: Vec<&String> = edit
            .paths
            .iter()
            .filter(|p| known.contains(*p) && before.get(*p) != tree.get(*p))
            .collect();
        // The files of one edit may reach the watcher in more than one
        // batch: wait until its rebuilds have named every changed file.
        let mut named: Vec<String> = Vec::new();
        while !changed
            .iter()
            .all(|p| named.iter().any(|l| l.contains(p.as_str())))
        {
            let lines = watch
                .wait_for("rebuilt after change to", Duration::from_secs(120))
                .map_err(|e| format!("{}\n{e}", context(&history)))?;
            let line = lines.last().expect("a line").clone();
            if !changed.iter().any(|p| line.contains(p.as_str())) {
                return Err(format!(
                    "{}\nthe watcher rebuilt for files this edit did not change: {line}\nit printed:\n{}",
                    context(&history),
                    watch.printed()
                ));
            }
            named.push(line);
        }
        if let Built::Package(bytes) = &clean {
            last_good = bytes.clone();
        }
        if package_bytes(&watched_out.join(&package_name)).as_ref() != Some(&last_good) {
            return Err(format!(
                "{}\nthe package ipub watch left differs from a clean build ({})",
                context(&history),
                clean.summary()
            ));
        }
        let built_arg = built_out.to_str().expect("utf-8");
        let (code, stdout, stderr) = support::ipub(
            dir.path(),
            &dir.path().join(".cache"),
            &["build", &root, "--out", built_arg],
        );
        let fresh = package_bytes(&built_out.join(&package_name));
        let agrees = match &clean {
            Built::Package(bytes) => code == 0 && fresh.as_ref() == Some(bytes),
            Built::Failed(_) => code == 1,
        };
        if !agrees {
            return Err(format!(
                "{}\na fresh `ipub build` differs from a clean build ({}); it exited with {code}:\n{stdout}{stderr}",
                context(&history),
                clean.summary()
            ));
        }
    }
    Ok(steps)
}

#[test]
fn watch_and_fresh_builds_equal_clean_builds_along_random_edits() {
    let long = support::env_count("IPUB_EDIT_COUNT");
    let steps = long.map_or(10, |n| n as usize);
    let seed = support::env_count("IPUB_EDIT_SEED").unwrap_or(0);
    let projects: &[&'static str] = if long.is_some() {
        &[
            "fp8-repeat",
            "matmul-f8",
            "mixed-f8",
            "mlp-f16",
            "attention-f16",
            "vit-fp8",
        ]
    } else {
        &["fp8-repeat", "matmul-f8"]
    };
    let only = std::env::var("IPUB_EDIT_PROJECTS").unwrap_or_default();
    let mut failures = Vec::new();
    for (i, &name) in projects.iter().enumerate() {
        if !only.is_empty() && !only.split(',').any(|o| o == name) {
            continue;
        }
        match check_watched_sequence(name, seed + 100 + i as u64, steps) {
            Ok(n) => {
                println!("{name}: {n} edits under ipub watch and fresh builds equal clean builds")
            }
            Err(error) => failures.push(error),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
