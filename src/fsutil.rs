//! Small file-system helpers the driver shares.

use camino::Utf8Path;
use std::io::Write as _;

/// Writes `bytes` to `path` atomically: into a temporary file in the same
/// directory, then renamed over `path`. On any error the temporary file is
/// removed and `path` is untouched, so a reader sees the old file or the
/// whole new one.
///
/// The file is not synced to disk: everything ipub writes is rebuilt from
/// its inputs, and every reader detects a torn file after a power loss
/// (packages, store entries and kernel cache entries carry checksums, and
/// the build stamp re-hashes the package), so durability is not worth a
/// sync on every build (tens of milliseconds for a vit-fp8 package).
pub fn write_atomic(path: &Utf8Path, bytes: &[u8]) -> std::io::Result<()> {
    let directory = match path.parent() {
        Some(parent) if !parent.as_str().is_empty() => parent,
        _ => Utf8Path::new("."),
    };
    std::fs::create_dir_all(directory)?;
    let mut file = tempfile::NamedTempFile::new_in(directory)?;
    file.write_all(bytes)?;
    file.persist(path).map_err(|error| error.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use camino::Utf8PathBuf;

    #[test]
    fn writes_replace_the_file_and_leave_nothing_else() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = Utf8PathBuf::from_path_buf(dir.path().to_path_buf()).expect("utf-8");
        let path = root.join("out.txt");
        write_atomic(&path, b"one").expect("write");
        write_atomic(&path, b"two").expect("rewrite");
        assert_eq!(std::fs::read(&path).expect("read"), b"two");
        assert_eq!(std::fs::read_dir(&root).expect("list").count(), 1);
    }

    #[test]
    fn a_failed_write_leaves_no_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = Utf8PathBuf::from_path_buf(dir.path().to_path_buf()).expect("utf-8");
        // A directory cannot be replaced by a file.
        let path = root.join("taken");
        std::fs::create_dir(&path).expect("mkdir");
        assert!(write_atomic(&path, b"x").is_err());
        assert_eq!(std::fs::read_dir(&root).expect("list").count(), 1);
    }
}
