//! Where file contents come from, without salsa: the [`Vfs`] trait the
//! database reads its inputs through, the real file system ([`OsFs`]) and
//! an in-memory one for tests ([`MemoryFs`]), [`FileSource`] for code that
//! reads either a file system or the database, and [`normalize`], the one
//! way a path is spelled so that one file has one name.

pub use crate::fsutil::ReadError;
use camino::{Utf8Path, Utf8PathBuf};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The largest project, include or kernel source file read: far beyond
/// any real source, small enough that a mistaken path (a log, an image)
/// is refused at once.
pub const MAX_SOURCE_FILE_BYTES: u64 = 16 << 20;

/// A file's text, or why it could not be read.
pub type FileText = Result<Arc<str>, ReadError>;

/// Where file contents come from.
pub trait Vfs: Send + Sync {
    /// Reads a whole file: only a regular file of UTF-8 text up to
    /// [`MAX_SOURCE_FILE_BYTES`].
    fn read(&self, path: &Utf8Path) -> FileText;
}

/// Anything files can be read from: a [`Vfs`], or the database itself
/// inside a query ([`DbFiles`](crate::db::DbFiles)), where every read is
/// a tracked dependency.
pub trait FileSource {
    fn read(&self, path: &Utf8Path) -> FileText;
}

impl<T: Vfs + ?Sized> FileSource for T {
    fn read(&self, path: &Utf8Path) -> FileText {
        Vfs::read(self, path)
    }
}

/// The real file system.
#[derive(Default, Clone, Copy, Debug)]
pub struct OsFs;

impl Vfs for OsFs {
    fn read(&self, path: &Utf8Path) -> FileText {
        crate::fsutil::read_text(path, MAX_SOURCE_FILE_BYTES).map(Arc::from)
    }
}

/// An in-memory file system for tests. A path that other files lie under
/// reads as a directory.
#[derive(Default, Clone, Debug)]
pub struct MemoryFs {
    files: Arc<Mutex<BTreeMap<Utf8PathBuf, Arc<str>>>>,
}

impl MemoryFs {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn write(&self, path: impl Into<Utf8PathBuf>, contents: &str) {
        self.files
            .lock()
            .expect("memory fs lock")
            .insert(path.into(), Arc::from(contents));
    }

    pub fn remove(&self, path: &Utf8Path) {
        self.files.lock().expect("memory fs lock").remove(path);
    }
}

impl Vfs for MemoryFs {
    fn read(&self, path: &Utf8Path) -> FileText {
        let files = self.files.lock().expect("memory fs lock");
        if let Some(text) = files.get(path) {
            return Ok(text.clone());
        }
        if files.keys().any(|p| p.starts_with(path)) {
            return Err(ReadError::NotAFile {
                kind: crate::fsutil::DIRECTORY,
            });
        }
        Err(ReadError::Missing)
    }
}

/// `path` with `.` and `dir/..` components removed lexically, so the same
/// file always has the same name (an include, a kernel's `#include`, a
/// path typed on the command line and a file watcher's event all meet
/// here). A leading `..` that cannot be resolved stays.
pub fn normalize(path: &Utf8Path) -> Utf8PathBuf {
    use camino::Utf8Component;
    let mut out = Utf8PathBuf::new();
    for component in path.components() {
        match component {
            Utf8Component::CurDir => {}
            Utf8Component::ParentDir => {
                let can_pop = out
                    .components()
                    .next_back()
                    .is_some_and(|c| matches!(c, Utf8Component::Normal(_)));
                if can_pop {
                    out.pop();
                } else if !out.has_root() {
                    out.push("..");
                }
            }
            other => out.push(other.as_str()),
        }
    }
    if out.as_str().is_empty() {
        out.push(".");
    }
    out
}

/// `path` made absolute against the current directory, then normalized:
/// what a path typed relative to one directory is from any other.
pub fn absolute(path: &Utf8Path) -> Utf8PathBuf {
    if path.is_absolute() {
        return normalize(path);
    }
    match std::env::current_dir()
        .ok()
        .and_then(|cwd| Utf8PathBuf::from_path_buf(cwd).ok())
    {
        Some(cwd) => normalize(&cwd.join(path)),
        None => normalize(path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_resolves_dots_lexically() {
        let n = |p: &str| normalize(Utf8Path::new(p)).to_string();
        assert_eq!(n("./dir/projects/p.toml"), "dir/projects/p.toml");
        assert_eq!(n("projects/../device/gelu.S"), "device/gelu.S");
        assert_eq!(n("../x/./y"), "../x/y");
        assert_eq!(n("/a/b/../../../c"), "/c");
        assert_eq!(n("./"), ".");
        assert_eq!(n("a/.."), ".");
    }
}
