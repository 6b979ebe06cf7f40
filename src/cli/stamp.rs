//! The build stamp: what the last successful build of a project into an
//! output directory read, and what it wrote.
//!
//! A fresh `ipub build` first re-hashes the files the stamp lists; when none
//! changed and the package on disk is the one the stamp describes, the build
//! is up to date without opening the pipeline at all. The package is not
//! read for that: the stamp records the file's identity as the build left it
//! (length, modification time, inode and change time) next to its hash, and
//! a file whose metadata still match is the file that hash was computed for.
//! Any write to the package (in place or by replacing it) moves its times or
//! its inode; then the package is read and hashed once, and it is rebuilt
//! unless its bytes are still the stamp's (a concurrent build of the same
//! project replaced it with the same bytes). Otherwise the stamp's
//! hashes (and the TOML texts it keeps) say what changed, for `--explain`.
//! Stamps live in the result store, keyed by project and output path.
//!
//! With a remote cache, a stamp is uploaded together with the package it
//! describes (one action, two outputs), so another machine building the
//! same project at the same paths from the same files finds the stamp,
//! sees no change, and takes the package from the remote instead of
//! building it ([`Stamp::restore_package`]).

use crate::db::{Database, Db};
use crate::store::{Lookup, Store};
use camino::{Utf8Path, Utf8PathBuf};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Stamp {
    /// Every file the build read, with the blake3 hash of its contents
    /// (`None`: the file did not exist).
    pub inputs: BTreeMap<Utf8PathBuf, Option<String>>,
    /// The texts of the TOML inputs, to name the keys an edit changed.
    pub tomls: BTreeMap<Utf8PathBuf, String>,
    pub package: Utf8PathBuf,
    pub package_len: u64,
    pub package_hash: String,
    /// The package file's metadata right after the build wrote it; `None`
    /// (a stamp from before they were recorded, or a file that could not be
    /// examined) never proves a no-op.
    #[serde(default)]
    pub package_file: Option<FileIdentity>,
}

/// What a `stat` says about a file, enough to tell that nothing wrote to it
/// since: a write moves the modification and change times, a replacement
/// gives a new inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FileIdentity {
    pub len: u64,
    /// Nanoseconds since the Unix epoch.
    pub modified_ns: u128,
    /// The inode's change time in nanoseconds (0 where there is none).
    pub changed_ns: i128,
    /// The inode number (0 where there is none).
    pub inode: u64,
}

impl FileIdentity {
    /// The identity of the file at `path` now, without reading it.
    pub(super) fn of(path: &Utf8Path) -> Option<FileIdentity> {
        let metadata = std::fs::symlink_metadata(path).ok()?;
        if !metadata.is_file() {
            return None;
        }
        let modified_ns = metadata
            .modified()
            .ok()?
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?
            .as_nanos();
        #[cfg(unix)]
        let (changed_ns, inode) = {
            use std::os::unix::fs::MetadataExt as _;
            (
                i128::from(metadata.ctime()) * 1_000_000_000 + i128::from(metadata.ctime_nsec()),
                metadata.ino(),
            )
        };
        #[cfg(not(unix))]
        let (changed_ns, inode) = (0, 0);
        Some(FileIdentity {
            len: metadata.len(),
            modified_ns,
            changed_ns,
            inode,
        })
    }
}

/// How one input differs from the stamp.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Change {
    pub path: Utf8PathBuf,
    pub what: ChangeKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ChangeKind {
    Created,
    Deleted,
    /// Edited; for a TOML file, the keys whose values differ.
    Edited {
        keys: Vec<String>,
    },
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.what {
            ChangeKind::Created => write!(f, "{} (created)", self.path),
            ChangeKind::Deleted => write!(f, "{} (deleted)", self.path),
            ChangeKind::Edited { keys } if keys.is_empty() => write!(f, "{}", self.path),
            ChangeKind::Edited { keys } => write!(f, "{}: {}", self.path, keys.join(", ")),
        }
    }
}

fn hash(contents: Option<&str>) -> Option<String> {
    contents.map(|c| blake3::hash(c.as_bytes()).to_hex().to_string())
}

/// The name of the package among the outputs of a stamp's remote action.
const PACKAGE_OUTPUT: &str = "package.ipuexe";

/// What stands for the default output directory in a stamp's key.
pub(crate) const DEFAULT_OUT: &str = "<default>";

/// The store key of a project built into `out`.
fn key(project: &Utf8Path, out: &Utf8Path) -> blake3::Hash {
    use crate::vfs::absolute;
    crate::store::key(&[
        b"stamp",
        absolute(project).as_str().as_bytes(),
        absolute(out).as_str().as_bytes(),
    ])
}

/// An absolute path as users see it: relative to the current directory
/// when it is inside it.
fn shown(path: &Utf8Path) -> Utf8PathBuf {
    std::env::current_dir()
        .ok()
        .and_then(|cwd| {
            path.as_std_path()
                .strip_prefix(cwd)
                .ok()
                .map(|p| p.to_owned())
        })
        .and_then(|p| Utf8PathBuf::from_path_buf(p).ok())
        .unwrap_or_else(|| path.to_owned())
}

impl Stamp {
    /// The stamp of the last build of `project` into `out`, if any.
    pub(crate) fn load(store: &Store, project: &Utf8Path, out: &Utf8Path) -> Option<Stamp> {
        match store.get("stamps", &key(project, out)) {
            Lookup::Hit(stamp) => Some(stamp),
            _ => None,
        }
    }

    /// Saves the stamp of a build that wrote `package`; with a remote
    /// tier the package is uploaded with it.
    pub(super) fn save(
        &self,
        store: &Store,
        project: &Utf8Path,
        out: &Utf8Path,
        package: &crate::package::file::Encoded,
    ) {
        self.save_bytes(store, project, out, || package.to_vec());
    }

    /// [`Stamp::save`] with the package's bytes made on demand (only a
    /// remote tier needs them).
    fn save_bytes(
        &self,
        store: &Store,
        project: &Utf8Path,
        out: &Utf8Path,
        package: impl FnOnce() -> Vec<u8>,
    ) {
        let outputs = match store.remote() {
            Some(_) => vec![(PACKAGE_OUTPUT.to_string(), std::sync::Arc::from(package()))],
            None => Vec::new(),
        };
        if let Err(error) = store.put_with_outputs("stamps", &key(project, out), self, outputs) {
            tracing::warn!(%error, "could not save the build stamp");
        }
    }

    /// Fetches the package this stamp describes from the remote cache and
    /// writes it, when it is the package this build would write: at the
    /// path a build of `project` into `out` writes (the stamp's project
    /// name, when `out` is the default), of the recorded length and hash,
    /// and a valid package of that name. Returns its length.
    pub(super) fn restore_package(
        &self,
        store: &Store,
        project: &Utf8Path,
        out: Option<&Utf8Path>,
    ) -> Option<u64> {
        let name = self.package.file_stem()?;
        if crate::project::limits::file_name_problem(name).is_some()
            || self.package.extension() != Some("ipuexe")
            || self.package != crate::vfs::absolute(&package_path(out, name))
        {
            return None;
        }
        let out_key = out.unwrap_or(Utf8Path::new(DEFAULT_OUT));
        let bytes = store.remote_output(
            "stamps",
            &key(project, out_key),
            PACKAGE_OUTPUT,
            self.package_len,
        )?;
        let problem = if bytes.len() as u64 != self.package_len
            || blake3::hash(&bytes).to_hex().as_str() != self.package_hash
        {
            Some("it is not the package its stamp describes".to_string())
        } else {
            match crate::package::file::parse(&bytes) {
                Ok(package) if package.graph.name == name => None,
                Ok(package) => Some(format!("it is a package of `{}`", package.graph.name)),
                Err(error) => Some(error.to_string()),
            }
        };
        if let Some(problem) = problem {
            if let Some(remote) = store.remote() {
                remote.report_corrupt(&format!("the package for {}", self.package), &problem);
            }
            return None;
        }
        match crate::fsutil::write_atomic(&self.package, &bytes) {
            Ok(()) => Some(self.package_len),
            Err(error) => {
                tracing::warn!(path = %self.package, %error, "cannot write the package from the remote cache");
                None
            }
        }
    }

    /// The stamp of a build that read what `db` holds and wrote `bytes` to
    /// `package` just now. The hash is the one computed from the bytes in
    /// memory, so recording it reads nothing back.
    pub(super) fn record(
        db: &Database,
        package: &Utf8Path,
        bytes: &crate::package::file::Encoded,
    ) -> Stamp {
        // Paths are recorded absolute: the stamp is keyed by absolute
        // paths, and the same build run from another directory must
        // re-check the same files, not the ones at the same relative paths.
        let mut stamp = Stamp {
            package: crate::vfs::absolute(package),
            package_len: bytes.len() as u64,
            package_hash: bytes.file_hash().to_hex().to_string(),
            // Only a file of the length just written can be those bytes.
            package_file: FileIdentity::of(package).filter(|f| f.len == bytes.len() as u64),
            ..Stamp::default()
        };
        for path in db.known_data_files() {
            // A tensor file's hash is the one its input computed on reading.
            let hash = db
                .data_file(&path)
                .contents(db)
                .as_ref()
                .ok()
                .map(|c| c.hash().to_hex().to_string());
            stamp.inputs.insert(crate::vfs::absolute(&path), hash);
        }
        for path in db.known_files() {
            if db.is_data_file(&path) {
                continue;
            }
            let contents = db.file(&path).contents(db).clone().ok();
            let path = crate::vfs::absolute(&path);
            if path.extension() == Some("toml") {
                if let Some(text) = &contents {
                    stamp.tomls.insert(path.clone(), text.to_string());
                }
            }
            stamp.inputs.insert(path, hash(contents.as_deref()));
        }
        stamp
    }

    /// How the files on disk differ from the stamp.
    pub(super) fn changes(&self) -> Vec<Change> {
        let mut changes = Vec::new();
        for (path, before) in &self.inputs {
            // Sources and tensor files alike: the hash of a text is the
            // hash of its bytes.
            let bytes = crate::fsutil::read_bytes(path, crate::vfs::MAX_DATA_FILE_BYTES).ok();
            let now_hash = bytes
                .as_deref()
                .map(|b| blake3::hash(b).to_hex().to_string());
            if now_hash == *before {
                continue;
            }
            let now = bytes.and_then(|b| String::from_utf8(b).ok());
            let what = match (before, &now_hash) {
                (None, _) => ChangeKind::Created,
                (Some(_), None) => ChangeKind::Deleted,
                (Some(_), Some(_)) => ChangeKind::Edited {
                    keys: match (self.tomls.get(path), &now) {
                        (Some(old), Some(text)) => toml_keys_changed(old, text),
                        _ => Vec::new(),
                    },
                },
            };
            changes.push(Change {
                path: shown(path),
                what,
            });
        }
        changes
    }

    /// Whether the package file is still the one this stamp wrote, from its
    /// metadata alone: the same length, times and inode as right after the
    /// build wrote it.
    pub(super) fn package_intact(&self) -> bool {
        self.package_file.is_some_and(|recorded| {
            recorded.len == self.package_len && FileIdentity::of(&self.package) == Some(recorded)
        })
    }

    /// Whether the package file holds the bytes this stamp describes,
    /// proven by reading and hashing it: the fallback when its metadata no
    /// longer match. Two builds of one project at once each replace the
    /// package with the same bytes, and the stamp saved last may record the
    /// identity of the file the other build's rename replaced. When the
    /// bytes are the stamp's, the stamp is saved again with the file's
    /// identity now, so the next check needs its metadata only.
    pub(super) fn package_rehashed(
        &self,
        store: &Store,
        project: &Utf8Path,
        out: &Utf8Path,
    ) -> bool {
        let Ok(bytes) = crate::fsutil::read_bytes(&self.package, self.package_len) else {
            return false;
        };
        if bytes.len() as u64 != self.package_len
            || blake3::hash(&bytes).to_hex().as_str() != self.package_hash
        {
            return false;
        }
        let refreshed = Stamp {
            package_file: FileIdentity::of(&self.package).filter(|f| f.len == self.package_len),
            ..self.clone()
        };
        refreshed.save_bytes(store, project, out, || bytes);
        true
    }
}

/// The dotted keys whose values differ between two TOML texts (operations
/// and tensors are named by their `name`: `op.fc1.shape`); empty when only
/// comments and layout changed. A new text that does not parse is
/// described as such; the fix of one that did not parse names no keys,
/// since there is nothing to compare it with, rather than describing the
/// text it replaced.
pub(super) fn toml_keys_changed(before: &str, after: &str) -> Vec<String> {
    let Ok(b) = after.parse::<toml::Table>() else {
        return vec!["(not valid TOML)".to_string()];
    };
    let Ok(a) = before.parse::<toml::Table>() else {
        return Vec::new();
    };
    let mut keys = Vec::new();
    diff_tables(&a, &b, "", &mut keys);
    keys
}

fn diff_tables(a: &toml::Table, b: &toml::Table, prefix: &str, out: &mut Vec<String>) {
    let names: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    for name in names {
        let path = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        match (a.get(name), b.get(name)) {
            (Some(x), Some(y)) => diff_values(x, y, &path, out),
            _ => out.push(path),
        }
    }
}

fn diff_values(a: &toml::Value, b: &toml::Value, path: &str, out: &mut Vec<String>) {
    use toml::Value;
    match (a, b) {
        (Value::Table(x), Value::Table(y)) => diff_tables(x, y, path, out),
        (Value::Array(x), Value::Array(y)) if named(x) && named(y) => {
            let by_name = |items: &[Value]| -> BTreeMap<String, toml::Table> {
                items
                    .iter()
                    .filter_map(|v| v.as_table())
                    .filter_map(|t| Some((t.get("name")?.as_str()?.to_string(), t.clone())))
                    .collect()
            };
            let (x, y) = (by_name(x), by_name(y));
            let names: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for name in names {
                let item = format!("{path}.{name}");
                match (x.get(name), y.get(name)) {
                    (Some(p), Some(q)) => diff_tables(p, q, &item, out),
                    _ => out.push(item),
                }
            }
        }
        _ if a != b => out.push(path.to_string()),
        _ => {}
    }
}

/// Whether every element is a table with a string `name`.
fn named(items: &[toml::Value]) -> bool {
    !items.is_empty()
        && items.iter().all(|v| {
            v.as_table()
                .and_then(|t| t.get("name"))
                .is_some_and(toml::Value::is_str)
        })
}

/// Where a project's package goes: `out`, else `target/ipub/<name>`.
pub fn package_path(out: Option<&Utf8Path>, name: &str) -> Utf8PathBuf {
    out.map_or_else(
        || Utf8PathBuf::from("target/ipub").join(name),
        Utf8Path::to_owned,
    )
    .join(format!("{name}.ipuexe"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_diffs_name_items_by_name_and_ignore_comments() {
        let before = "[project]\nname = \"x\"\n[[op]]\nname = \"a\"\nshape = [2, 3]\n[[op]]\nname = \"b\"\nkind = \"add\"\n";
        let after = "# a comment\n[project]\nname = \"x\"\n[[op]]\nname = \"b\"\nkind = \"add\"\n[[op]]\nname = \"a\"\nshape = [2, 4]\n[[op]]\nname = \"c\"\n";
        assert_eq!(toml_keys_changed(before, after), ["op.a.shape", "op.c"]);
        assert!(toml_keys_changed(before, &format!("# note\n{before}")).is_empty());
        assert_eq!(toml_keys_changed(before, "[oops"), ["(not valid TOML)"]);
        assert!(toml_keys_changed("[oops", before).is_empty());
    }

    #[test]
    fn a_stamp_sees_edits_creations_and_deletions() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = Utf8Path::from_path(dir.path()).expect("utf-8");
        let (kept, edited, deleted, created) = (
            root.join("kept.S"),
            root.join("p.toml"),
            root.join("gone.S"),
            root.join("new.toml"),
        );
        std::fs::write(&kept, "nop\n").expect("write");
        std::fs::write(&edited, "[a]\nx = 1\n").expect("write");
        std::fs::write(&deleted, "nop\n").expect("write");
        let mut stamp = Stamp::default();
        for path in [&kept, &edited, &deleted] {
            let text = std::fs::read_to_string(path).expect("read");
            stamp.inputs.insert(path.clone(), hash(Some(&text)));
        }
        stamp.tomls.insert(edited.clone(), "[a]\nx = 1\n".into());
        stamp.inputs.insert(created.clone(), None);
        assert!(stamp.changes().is_empty());
        std::fs::write(&edited, "[a]\nx = 2\n").expect("write");
        std::fs::remove_file(&deleted).expect("remove");
        std::fs::write(&created, "").expect("write");
        let changes: Vec<String> = stamp
            .changes()
            .iter()
            .map(|c| c.to_string().replace(root.as_str(), "."))
            .collect();
        assert_eq!(
            changes,
            [
                "./gone.S (deleted)",
                "./new.toml (created)",
                "./p.toml: a.x"
            ]
        );
    }

    #[test]
    fn a_package_written_after_its_stamp_is_not_intact() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = Utf8Path::from_path(dir.path()).expect("utf-8");
        let package = root.join("p.ipuexe");
        std::fs::write(&package, b"0123456789").expect("write");
        let stamp = Stamp {
            package: package.clone(),
            package_len: 10,
            package_file: FileIdentity::of(&package),
            ..Stamp::default()
        };
        assert!(stamp.package_intact());
        // Without the recorded metadata nothing is proven.
        let unproven = Stamp {
            package_file: None,
            ..stamp.clone()
        };
        assert!(!unproven.package_intact());
        // An edit in place of the same length moves the times even within
        // one clock tick of the write: the change time is set from the
        // clock, and the modification time is set back explicitly here to
        // stand for a coarse clock.
        let before = std::fs::metadata(&package).expect("stat");
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&package, b"9876543210").expect("write");
        assert!(!stamp.package_intact());
        let file = std::fs::File::options()
            .write(true)
            .open(&package)
            .expect("open");
        file.set_modified(before.modified().expect("mtime"))
            .expect("set mtime");
        drop(file);
        assert!(!stamp.package_intact(), "the change time still differs");
        // A replacement of another length, and a deletion.
        std::fs::write(&package, b"short").expect("write");
        assert!(!stamp.package_intact());
        std::fs::remove_file(&package).expect("remove");
        assert!(!stamp.package_intact());
    }

    #[test]
    fn a_package_replaced_by_the_same_bytes_is_proven_by_its_hash() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = Utf8Path::from_path(dir.path()).expect("utf-8");
        let store = Store::new(root.join("store"));
        let (project, out) = (root.join("p.toml"), Utf8Path::new(DEFAULT_OUT));
        let package = root.join("p.ipuexe");
        let bytes = b"0123456789";
        std::fs::write(&package, bytes).expect("write");
        let stamp = Stamp {
            package: package.clone(),
            package_len: 10,
            package_hash: blake3::hash(bytes).to_hex().to_string(),
            package_file: FileIdentity::of(&package),
            ..Stamp::default()
        };
        // Another build renames its own file, with the same bytes, over
        // the package: a new inode.
        let other = root.join("other");
        std::fs::write(&other, bytes).expect("write");
        std::fs::rename(&other, &package).expect("rename");
        assert!(!stamp.package_intact());
        assert!(stamp.package_rehashed(&store, &project, out));
        // The stamp was saved again with the new identity.
        store.flush();
        let saved = Stamp::load(&store, &project, out).expect("saved stamp");
        assert!(saved.package_intact());
        // Other bytes of the same length are not the stamp's.
        std::fs::write(&package, b"9876543210").expect("write");
        assert!(!saved.package_intact());
        assert!(!saved.package_rehashed(&store, &project, out));
    }
}
