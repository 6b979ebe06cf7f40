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
    write_atomic_chunks(path, &[bytes])
}

/// [`write_atomic`] of the concatenation of `chunks`, without gathering
/// them into one buffer first.
pub fn write_atomic_chunks(path: &Utf8Path, chunks: &[&[u8]]) -> std::io::Result<()> {
    let directory = match path.parent() {
        Some(parent) if !parent.as_str().is_empty() => parent,
        _ => Utf8Path::new("."),
    };
    std::fs::create_dir_all(directory)?;
    // A temporary file is private (0600) by default; what ipub writes is
    // an ordinary output file, so it gets the permissions of one: 0666
    // less the umask (0644 usually), which the OS applies at creation.
    let mut builder = tempfile::Builder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let mut file = builder.tempfile_in(directory)?;
    for chunk in chunks {
        file.write_all(chunk)?;
    }
    file.persist(path).map_err(|error| error.error)?;
    Ok(())
}

/// Serde for byte vectors as one lowercase hex string.
pub mod hex_bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    const DIGITS: &[u8; 16] = b"0123456789abcdef";

    pub fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        let mut text = Vec::with_capacity(bytes.len() * 2);
        for &b in bytes {
            text.push(DIGITS[usize::from(b >> 4)]);
            text.push(DIGITS[usize::from(b & 15)]);
        }
        // Only ASCII digits were pushed.
        serializer.serialize_str(std::str::from_utf8(&text).unwrap_or_default())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        let digit = |c: u8| match c {
            b'0'..=b'9' => Ok(c - b'0'),
            b'a'..=b'f' => Ok(c - b'a' + 10),
            _ => Err(serde::de::Error::custom("not a lowercase hex digit")),
        };
        let text = text.as_bytes();
        if text.len() % 2 != 0 {
            return Err(serde::de::Error::custom("odd number of hex digits"));
        }
        text.chunks_exact(2)
            .map(|pair| Ok(digit(pair[0])? << 4 | digit(pair[1])?))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use camino::Utf8PathBuf;

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Bytes(#[serde(with = "hex_bytes")] Vec<u8>);

    #[test]
    fn hex_bytes_round_trip_and_reject_bad_digits() {
        let bytes = Bytes(vec![0, 1, 0xab, 0xff]);
        let json = serde_json::to_string(&bytes).expect("encodes");
        assert_eq!(json, "\"0001abff\"");
        assert_eq!(
            serde_json::from_str::<Bytes>(&json).expect("decodes"),
            bytes
        );
        assert!(serde_json::from_str::<Bytes>("\"0g\"").is_err());
        assert!(serde_json::from_str::<Bytes>("\"abc\"").is_err());
    }

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

    #[cfg(unix)]
    #[test]
    fn written_files_get_ordinary_permissions() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().expect("tempdir");
        let root = Utf8PathBuf::from_path_buf(dir.path().to_path_buf()).expect("utf-8");
        let path = root.join("out.bin");
        write_atomic(&path, b"x").expect("write");
        let mode = std::fs::metadata(&path)
            .expect("metadata")
            .permissions()
            .mode()
            & 0o777;
        // 0666 less the process's umask (Linux shows it in /proc).
        let umask = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|status| {
                let line = status.lines().find(|l| l.starts_with("Umask:"))?;
                u32::from_str_radix(line["Umask:".len()..].trim(), 8).ok()
            });
        match umask {
            Some(umask) => assert_eq!(mode, 0o666 & !umask, "{mode:o}"),
            None => assert_eq!(mode & 0o111, 0, "{mode:o}"),
        }
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
