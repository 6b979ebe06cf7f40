//! Where file contents come from, without salsa: the [`Vfs`] trait the
//! database reads its inputs through (source text, and the bytes of tensor
//! files), the real file system ([`OsFs`]) and an in-memory one for tests
//! ([`MemoryFs`]), [`FileSource`] for code that reads either a file system
//! or the database, and [`normalize`], the one way a path is spelled so
//! that one file has one name.

pub(crate) use crate::fsutil::ReadError;
use camino::{Utf8Path, Utf8PathBuf};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The largest project, include or kernel source file read: far beyond
/// any real source, small enough that a mistaken path (a log, an image)
/// is refused at once.
pub(crate) const MAX_SOURCE_FILE_BYTES: u64 = 16 << 20;

/// The largest tensor file (`.safetensors`, `.npy`) read: a checkpoint
/// of a few hundred million parameters, far more than the 900 MB of tile
/// memory of a whole chip can use, so one file can hold every layer a
/// project reads.
pub(crate) const MAX_DATA_FILE_BYTES: u64 = 4 << 30;

/// A file's text, or why it could not be read.
pub(crate) type FileText = Result<Arc<str>, ReadError>;

/// A binary file's bytes, or why it could not be read.
pub(crate) type FileBytes = Result<Arc<Contents>, ReadError>;

/// The bytes of a binary file with their blake3 hash, computed once when
/// the file is read: contents compare by length and hash, so deciding
/// whether a re-read file changed, or keying anything on it, never looks
/// at gigabytes twice.
#[derive(Clone)]
pub struct Contents {
    bytes: Vec<u8>,
    hash: blake3::Hash,
}

impl Contents {
    pub(crate) fn new(bytes: Vec<u8>) -> Contents {
        let hash = blake3::hash(&bytes);
        Contents { bytes, hash }
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub(crate) fn hash(&self) -> blake3::Hash {
        self.hash
    }
}

impl PartialEq for Contents {
    fn eq(&self, other: &Self) -> bool {
        self.bytes.len() == other.bytes.len() && self.hash == other.hash
    }
}

impl Eq for Contents {}

impl std::hash::Hash for Contents {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.hash.as_bytes().hash(state);
    }
}

impl std::fmt::Debug for Contents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} bytes, blake3 {}",
            self.bytes.len(),
            self.hash.to_hex()
        )
    }
}

/// Where file contents come from.
pub trait Vfs: Send + Sync {
    /// Reads a whole file: only a regular file of UTF-8 text up to
    /// [`MAX_SOURCE_FILE_BYTES`].
    fn read(&self, path: &Utf8Path) -> FileText;

    /// Reads a whole binary file: only a regular file up to
    /// [`MAX_DATA_FILE_BYTES`].
    fn read_bytes(&self, path: &Utf8Path) -> FileBytes;
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

    fn read_bytes(&self, path: &Utf8Path) -> FileBytes {
        crate::fsutil::read_bytes(path, MAX_DATA_FILE_BYTES).map(|b| Arc::new(Contents::new(b)))
    }
}

/// An in-memory file system for tests. A path that other files lie under
/// reads as a directory.
#[derive(Default, Clone, Debug)]
pub struct MemoryFs {
    files: Arc<Mutex<BTreeMap<Utf8PathBuf, Arc<[u8]>>>>,
}

impl MemoryFs {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn write(&self, path: impl Into<Utf8PathBuf>, contents: &str) {
        self.write_bytes(path, contents.as_bytes());
    }

    pub fn write_bytes(&self, path: impl Into<Utf8PathBuf>, contents: &[u8]) {
        self.files
            .lock()
            .expect("memory fs lock")
            .insert(path.into(), Arc::from(contents));
    }

    fn get(&self, path: &Utf8Path) -> Result<Arc<[u8]>, ReadError> {
        let files = self.files.lock().expect("memory fs lock");
        if let Some(bytes) = files.get(path) {
            return Ok(bytes.clone());
        }
        if files.keys().any(|p| p.starts_with(path)) {
            return Err(ReadError::NotAFile {
                kind: crate::fsutil::DIRECTORY,
            });
        }
        Err(ReadError::Missing)
    }

    pub fn remove(&self, path: &Utf8Path) {
        self.files.lock().expect("memory fs lock").remove(path);
    }
}

impl Vfs for MemoryFs {
    fn read(&self, path: &Utf8Path) -> FileText {
        let bytes = self.get(path)?;
        std::str::from_utf8(&bytes)
            .map(Arc::from)
            .map_err(|_| ReadError::NotUtf8)
    }

    fn read_bytes(&self, path: &Utf8Path) -> FileBytes {
        Ok(Arc::new(Contents::new(self.get(path)?.to_vec())))
    }
}

/// `path` with `.` and `dir/..` components removed lexically, so the same
/// file always has the same name (an include, a kernel's `#include`, a
/// path typed on the command line and a file watcher's event all meet
/// here). A leading `..` that cannot be resolved stays.
pub(crate) fn normalize(path: &Utf8Path) -> Utf8PathBuf {
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
pub(crate) fn absolute(path: &Utf8Path) -> Utf8PathBuf {
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
