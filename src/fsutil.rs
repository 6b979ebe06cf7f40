//! Small file-system helpers the driver shares: atomic writes, and reads
//! that only take regular files up to a size limit.
//!
//! Every file ipub reads may come from someone else, so a read never opens
//! a FIFO (which would block forever), a device (`/dev/zero` never ends) or
//! a directory, and never takes more than its caller's limit: the error
//! says which of these it was.

use camino::Utf8Path;
use std::io::{Read as _, Write as _};

/// Why a file was not read.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum ReadError {
    #[error("it does not exist")]
    Missing,
    #[error("it is {kind}, not a regular file")]
    NotAFile { kind: &'static str },
    #[error("it is {size} bytes, more than the limit of {limit} bytes ({})", size_text(*limit))]
    TooLarge { size: u64, limit: u64 },
    #[error("it is not UTF-8 text")]
    NotUtf8,
    #[error("{0}")]
    Io(String),
}

/// How [`ReadError::NotAFile`] names a directory.
pub(crate) const DIRECTORY: &str = "a directory";

impl ReadError {
    /// Whether the path is a directory (which is what a kernel directory
    /// should be).
    pub(crate) fn is_directory(&self) -> bool {
        matches!(self, ReadError::NotAFile { kind } if *kind == DIRECTORY)
    }

    fn io(error: &std::io::Error) -> ReadError {
        match error.kind() {
            std::io::ErrorKind::NotFound => ReadError::Missing,
            _ => ReadError::Io(error.to_string()),
        }
    }
}

/// A byte count in the largest binary unit that divides it, for limits
/// (`16 MiB`).
pub(crate) fn size_text(bytes: u64) -> String {
    for (unit, size) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if bytes >= size && bytes.is_multiple_of(size) {
            return format!("{} {unit}", bytes / size);
        }
    }
    format!("{bytes} bytes")
}

/// What kind of file `file_type` is, for messages.
fn file_kind(file_type: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if file_type.is_fifo() {
            return "a FIFO";
        }
        if file_type.is_char_device() {
            return "a character device";
        }
        if file_type.is_block_device() {
            return "a block device";
        }
        if file_type.is_socket() {
            return "a socket";
        }
    }
    if file_type.is_dir() {
        DIRECTORY
    } else {
        "a special file"
    }
}

/// Reads the regular file at `path` if it holds at most `limit` bytes.
///
/// The file's type is checked before it is opened (opening a FIFO for
/// reading blocks until a writer comes) and again on the open file, and
/// the read stops one byte past the limit, so a file that grows while it
/// is read is refused as well.
pub fn read_bytes(path: &Utf8Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    let regular = |metadata: &std::fs::Metadata| {
        if !metadata.is_file() {
            return Err(ReadError::NotAFile {
                kind: file_kind(metadata.file_type()),
            });
        }
        if metadata.len() > limit {
            return Err(ReadError::TooLarge {
                size: metadata.len(),
                limit,
            });
        }
        Ok(())
    };
    regular(&std::fs::metadata(path).map_err(|e| ReadError::io(&e))?)?;
    let file = std::fs::File::open(path).map_err(|e| ReadError::io(&e))?;
    let metadata = file.metadata().map_err(|e| ReadError::io(&e))?;
    regular(&metadata)?;
    let mut bytes = Vec::with_capacity(metadata.len() as usize);
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| ReadError::io(&e))?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge {
            size: bytes.len() as u64,
            limit,
        });
    }
    Ok(bytes)
}

/// [`read_bytes`] of a file that must be UTF-8 text.
pub(crate) fn read_text(path: &Utf8Path, limit: u64) -> Result<String, ReadError> {
    String::from_utf8(read_bytes(path, limit)?).map_err(|_| ReadError::NotUtf8)
}

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
pub(crate) fn write_atomic(path: &Utf8Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic_chunks(path, &[bytes])
}

/// [`write_atomic`] of the concatenation of `chunks`, without gathering
/// them into one buffer first.
///
/// A symbolic link is followed: the file it names is replaced, the link
/// kept. Anything else that is not a regular file or a directory (a
/// device such as `/dev/stdout` or `/dev/null`, a named pipe) is written
/// through, in place, as a shell's `>` would: renaming over it would
/// replace the node itself.
pub(crate) fn write_atomic_chunks(path: &Utf8Path, chunks: &[&[u8]]) -> std::io::Result<()> {
    let resolved = resolve_links(path)?;
    let path = resolved.as_path();
    if let Ok(metadata) = std::fs::metadata(path) {
        if !metadata.is_file() && !metadata.is_dir() {
            let mut file = std::fs::OpenOptions::new().write(true).open(path)?;
            for chunk in chunks {
                file.write_all(chunk)?;
            }
            return file.flush();
        }
    }
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

/// `path` with its symbolic links followed to the path they name in the
/// end, which need not exist yet (a dangling link names the file to
/// create). Gives up with an error after 40 links, as the OS does.
fn resolve_links(path: &Utf8Path) -> std::io::Result<camino::Utf8PathBuf> {
    let mut path = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&path) {
            Ok(metadata) if metadata.file_type().is_symlink() => {
                let target = std::fs::read_link(&path)?;
                let target = camino::Utf8PathBuf::from_path_buf(target).map_err(|target| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        format!("link target {} is not UTF-8", target.display()),
                    )
                })?;
                path = match path.parent() {
                    Some(parent) if target.is_relative() => parent.join(target),
                    _ => target,
                };
            }
            _ => return Ok(path),
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("{path}: too many levels of symbolic links"),
    ))
}

/// Serde for byte vectors as one lowercase hex string.
pub(crate) mod hex_bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    const DIGITS: &[u8; 16] = b"0123456789abcdef";

    pub(crate) fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        let mut text = Vec::with_capacity(bytes.len() * 2);
        for &b in bytes {
            text.push(DIGITS[usize::from(b >> 4)]);
            text.push(DIGITS[usize::from(b & 15)]);
        }
        // Only ASCII digits were pushed.
        serializer.serialize_str(std::str::from_utf8(&text).unwrap_or_default())
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<u8>, D::Error> {
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

    /// A link is followed and kept; a named pipe is written through and
    /// stays a pipe: renaming over either would replace the node.
    #[cfg(unix)]
    #[test]
    fn writes_follow_links_and_write_through_pipes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = Utf8PathBuf::from_path_buf(dir.path().to_path_buf()).expect("utf-8");
        std::fs::create_dir(root.join("real")).expect("mkdir");
        std::fs::write(root.join("real/target.json"), "old").expect("write");
        std::os::unix::fs::symlink("real/target.json", root.join("link.json")).expect("link");
        write_atomic(&root.join("link.json"), b"new").expect("write through the link");
        let link = std::fs::symlink_metadata(root.join("link.json")).expect("metadata");
        assert!(link.file_type().is_symlink());
        assert_eq!(
            std::fs::read(root.join("real/target.json")).expect("read"),
            b"new"
        );
        // A dangling link names the file to create.
        std::os::unix::fs::symlink("real/made.json", root.join("dangling")).expect("link");
        write_atomic(&root.join("dangling"), b"made").expect("write");
        assert_eq!(
            std::fs::read(root.join("real/made.json")).expect("read"),
            b"made"
        );
        // A loop of links is an error, not a hang.
        std::os::unix::fs::symlink("loop", root.join("loop")).expect("link");
        assert!(write_atomic(&root.join("loop"), b"x").is_err());
        let fifo = root.join("pipe");
        let made = std::process::Command::new("mkfifo")
            .arg(fifo.as_str())
            .status()
            .expect("mkfifo");
        assert!(made.success());
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).expect("read the pipe"))
        };
        write_atomic(&fifo, b"piped").expect("write through the pipe");
        assert_eq!(reader.join().expect("reader"), b"piped");
        let metadata = std::fs::symlink_metadata(&fifo).expect("metadata");
        use std::os::unix::fs::FileTypeExt as _;
        assert!(metadata.file_type().is_fifo());
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
    fn reads_refuse_special_files_and_files_over_the_limit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = Utf8PathBuf::from_path_buf(dir.path().to_path_buf()).expect("utf-8");
        let path = root.join("text");
        std::fs::write(&path, "12345").expect("write");
        assert_eq!(read_text(&path, 5).as_deref(), Ok("12345"));
        let error = read_text(&path, 4).expect_err("over the limit");
        assert_eq!(error, ReadError::TooLarge { size: 5, limit: 4 });
        assert_eq!(
            read_text(&root.join("nope"), 4).expect_err("missing"),
            ReadError::Missing
        );
        let error = read_text(&root, 4).expect_err("a directory");
        assert_eq!(error.to_string(), "it is a directory, not a regular file");
        std::fs::write(&path, [0xff, 0xfe]).expect("write");
        assert_eq!(read_text(&path, 5), Err(ReadError::NotUtf8));
        // `/dev/zero` never ends and a FIFO blocks whoever opens it: both
        // are refused before anything is read.
        let error = read_bytes(Utf8Path::new("/dev/zero"), 1 << 20).expect_err("a device");
        assert_eq!(
            error.to_string(),
            "it is a character device, not a regular file"
        );
        let fifo = root.join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(fifo.as_str())
            .status()
            .expect("mkfifo");
        assert!(made.success());
        assert_eq!(
            read_text(&fifo, 4),
            Err(ReadError::NotAFile { kind: "a FIFO" })
        );
        assert_eq!(size_text(16 << 20), "16 MiB");
        assert_eq!(size_text(1000), "1000 bytes");
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
