//! What both suites share: file trees in memory with the crate's kernel
//! sources, clean builds, the `ipub` binary in a directory of its own.

use camino::Utf8Path;
use ipub::db::{Database, Db, SourceFile};
use ipub::vfs::MemoryFs;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

/// The crate's kernel sources, as `(path relative to the crate, text)`.
pub fn kernel_sources() -> Vec<(String, String)> {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["device", "device/include"] {
        let mut entries: Vec<_> = std::fs::read_dir(crate_dir.join(dir))
            .expect("the crate's device directory")
            .map(|e| e.expect("directory entry").path())
            .filter(|p| p.is_file())
            .collect();
        entries.sort();
        for path in entries {
            let name = path.file_name().and_then(|n| n.to_str()).expect("utf-8");
            let text = std::fs::read_to_string(&path).expect("kernel source");
            files.push((format!("{dir}/{name}"), text));
        }
    }
    files
}

/// An in-memory tree holding the kernel sources under `device/` and `files`.
pub fn memory_tree(files: &[(String, String)]) -> MemoryFs {
    let fs = MemoryFs::new();
    for (path, text) in kernel_sources().iter().chain(files) {
        fs.write(path.as_str(), text);
    }
    fs
}

/// A database over `fs` with nothing cached: every phase computes.
pub fn clean_database(fs: &MemoryFs) -> Database {
    Database::new(Arc::new(fs.clone()))
}

/// What one build of a project produced: the package bytes, or the
/// errors as the user reads them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Built {
    Package(Vec<u8>),
    Failed(String),
}

impl Built {
    pub fn summary(&self) -> String {
        match self {
            Built::Package(bytes) => format!(
                "package of {} bytes, blake3 {}",
                bytes.len(),
                blake3::hash(bytes).to_hex()
            ),
            Built::Failed(errors) => format!("build failed:\n{errors}"),
        }
    }
}

/// Builds `file` through the same phases as `ipub build` and `ipub watch`.
pub fn build(db: &Database, file: SourceFile) -> Built {
    let outcome = ipub::cli::build::build(db, file, false);
    match (outcome.ok, outcome.package) {
        (true, Some(bytes)) => Built::Package(bytes.to_vec()),
        _ => Built::Failed(build_errors(db, file)),
    }
}

/// The errors of a failed build, rendered as `ipub build` prints them.
pub fn build_errors(db: &Database, file: SourceFile) -> String {
    match ipub::pipeline::package::package_bytes(db, file) {
        Ok(_) => "no error, yet the build did not finish".to_string(),
        Err(ipub::pipeline::BuildError::Project(diagnostics)) => rendered(db, diagnostics),
        Err(other) => other.to_string(),
    }
}

/// Diagnostics rendered with the database's file contents.
pub fn rendered(db: &Database, diagnostics: &[ipub::diagnostic::Diagnostic]) -> String {
    diagnostics
        .iter()
        .map(|d| {
            ipub::diagnostic::render(d, &|path: &Utf8Path| {
                db.file(path)
                    .contents(db)
                    .as_deref()
                    .ok()
                    .map(str::to_string)
            })
        })
        .collect()
}

/// Runs `ipub ARGS` in `dir` with the cache (store and kernels) in
/// `cache`; returns the exit code, stdout and stderr.
pub fn ipub(dir: &Path, cache: &Path, args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_ipub"))
        .args(args)
        .current_dir(dir)
        .env("IPUB_CACHE_DIR", cache)
        .env("IPUB_DEVICE_LOCK", cache.join("device.lock"))
        .env_remove("RUST_LOG")
        .env_remove("IPUB_LOG")
        .output()
        .expect("runs ipub");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Writes `files` (path, text) under `root`, creating directories.
pub fn write_tree<'a>(root: &Path, files: impl IntoIterator<Item = (&'a String, &'a String)>) {
    for (path, text) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(&path, text).expect("write");
    }
}

/// An environment variable read as a number, for the long runs.
pub fn env_count(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    match value.trim().parse() {
        Ok(n) => Some(n),
        Err(_) => panic!("{name}={value} is not a count"),
    }
}

/// The text of a caught panic.
pub fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic without a message".to_string())
}
