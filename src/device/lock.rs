//! The device lock: one run owns a device at a time, across processes.
//!
//! The lock is an advisory exclusive lock on a file; the operating system
//! releases it when the process ends, so a crashed run never leaves the
//! device locked.

use camino::{Utf8Path, Utf8PathBuf};
use std::fs::{File, OpenOptions};
use std::io;

/// Held while a run owns the device; dropping it releases the device.
#[derive(Debug)]
pub(crate) struct DeviceLock {
    _file: File,
}

impl DeviceLock {
    /// Waits until the lock at `path` is free and takes it. Errors name
    /// the lock file.
    pub(crate) fn acquire(path: &Utf8Path) -> io::Result<DeviceLock> {
        let named =
            |error: io::Error| io::Error::new(error.kind(), format!("device lock {path}: {error}"));
        if let Some(parent) = path.parent().filter(|p| !p.as_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(named)?;
        }
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(named)?;
        tracing::info!(path = %path, "waiting for hardware ownership");
        file.lock().map_err(named)?;
        tracing::info!(path = %path, "acquired hardware ownership");
        Ok(DeviceLock { _file: file })
    }

    #[cfg(test)]
    /// Takes the lock only if nobody holds it.
    pub(super) fn try_acquire(path: &Utf8Path) -> io::Result<Option<DeviceLock>> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)?;
        match file.try_lock() {
            Ok(()) => Ok(Some(DeviceLock { _file: file })),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(error)) => Err(error),
        }
    }
}

/// The default lock path: `$IPUB_DEVICE_LOCK`, or `ipub-device.lock` in the
/// system's temporary directory.
pub(crate) fn default_lock_path() -> Utf8PathBuf {
    if let Ok(path) = std::env::var("IPUB_DEVICE_LOCK") {
        return Utf8PathBuf::from(path);
    }
    let temp = std::env::temp_dir();
    Utf8PathBuf::from_path_buf(temp.join("ipub-device.lock"))
        .unwrap_or_else(|_| Utf8PathBuf::from("/tmp/ipub-device.lock"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_excludes_others_until_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = Utf8PathBuf::from_path_buf(dir.path().join("device.lock")).expect("utf-8 path");
        let held = DeviceLock::acquire(&path).expect("first lock");
        assert!(DeviceLock::try_acquire(&path).expect("try").is_none());
        drop(held);
        assert!(DeviceLock::try_acquire(&path).expect("try").is_some());
    }

    #[test]
    fn a_lock_path_that_is_a_directory_is_named_in_the_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = Utf8PathBuf::from_path_buf(dir.path().to_path_buf()).expect("utf-8 path");
        let error = DeviceLock::acquire(&path).expect_err("a directory");
        assert!(
            error
                .to_string()
                .starts_with(&format!("device lock {path}: ")),
            "{error}"
        );
    }
}
