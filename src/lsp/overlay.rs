//! The editor's unsaved text over the disk.
//!
//! The database reads every file through a [`Vfs`]; the server gives it an
//! [`Overlay`]: an open document's text as the editor last sent it, and the
//! disk for everything else. An edit then reaches the queries the way a
//! save reaches `ipub watch`: the overlay changes, the server refreshes the
//! file's input, and salsa recomputes what read it.

use crate::vfs::{FileBytes, FileText, OsFs, ReadError, Vfs, MAX_SOURCE_FILE_BYTES};
use camino::{Utf8Path, Utf8PathBuf};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Open documents over the real file system.
#[derive(Clone, Default)]
pub(crate) struct Overlay {
    open: Arc<Mutex<HashMap<Utf8PathBuf, Arc<str>>>>,
}

impl Overlay {
    /// Sets an open document's text.
    pub(super) fn set(&self, path: &Utf8Path, text: &str) {
        self.lock().insert(path.to_owned(), Arc::from(text));
    }

    /// Closes a document: its file is read from the disk again.
    pub fn remove(&self, path: &Utf8Path) {
        self.lock().remove(path);
    }

    pub(super) fn is_open(&self, path: &Utf8Path) -> bool {
        self.lock().contains_key(path)
    }

    pub(super) fn open_paths(&self) -> Vec<Utf8PathBuf> {
        let mut paths: Vec<Utf8PathBuf> = self.lock().keys().cloned().collect();
        paths.sort();
        paths
    }

    /// The text of an open document.
    pub(super) fn text(&self, path: &Utf8Path) -> Option<Arc<str>> {
        self.lock().get(path).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Utf8PathBuf, Arc<str>>> {
        self.open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Vfs for Overlay {
    /// An open document over the size limit of source files is refused
    /// as the file would be ([`MAX_SOURCE_FILE_BYTES`]): the editor and
    /// `ipub check` agree on it.
    fn read(&self, path: &Utf8Path) -> FileText {
        let Some(text) = self.text(path) else {
            return Vfs::read(&OsFs, path);
        };
        let size = text.len() as u64;
        if size > MAX_SOURCE_FILE_BYTES {
            return Err(ReadError::TooLarge {
                size,
                limit: MAX_SOURCE_FILE_BYTES,
            });
        }
        Ok(text)
    }

    /// Tensor files are not edited in the editor: always the disk's.
    fn read_bytes(&self, path: &Utf8Path) -> FileBytes {
        OsFs.read_bytes(path)
    }
}
