//! The content-addressed kernel cache.
//!
//! An entry lives at `<root>/kernels/<key>/{kernel.o,kernel.json}`, where
//! the root is `$IPUB_CACHE_DIR`, else `$XDG_CACHE_HOME/ipub`, else
//! `~/.cache/ipub`. The key is blake3 over everything the result depends on:
//! the assembler's build identity, the target, the variant's name, entry and
//! sorted defines, and every file the preprocessor read (path and contents),
//! so an edit to a source or to anything it includes changes exactly the
//! keys of the variants built from it.
//!
//! Writes are atomic (temporary file in the entry's directory, then rename)
//! and `kernel.json` is written last, so a reader sees a whole entry or a
//! miss. Builds are deterministic, so two builders racing on one key write
//! identical bytes and both succeed. Every read is verified: the metadata
//! must parse, be of this format, name the same key, carry the object's
//! hash and a checksum over the key, the object and all of itself
//! ([`KernelMetadata::entry_checksum`]), and the object must parse;
//! otherwise the entry is reported with `tracing::warn!`, removed and
//! rebuilt. The checksum is what makes a damaged parameter offset or cost
//! formula, or another kernel's entry filed under this key, a miss rather
//! than a wrong package.
//!
//! The cache is bounded: after each build, [`KernelCache::evict_to_budget`]
//! removes the entries unused for 30 days, then the least recently used
//! ones beyond `$IPUB_KERNEL_CACHE_MAX_MB` (default 256 MB). A hit counts
//! as a use: it sets the modification time of the entry's `kernel.json`.
//! An entry is removed metadata first, so one half removed (by an
//! eviction that raced a reader, or that was killed) is a miss, rebuilt.
//!
//! With a remote tier ([`crate::store::remote`]), a local miss asks the
//! remote cache for the action `kernels`/key with the outputs `kernel.o`
//! and `kernel.json`; what it gets is verified exactly as a local entry is
//! and written into the local cache. A kernel compiled here is uploaded.

use super::{
    compile_preprocessed, Compiled, KernelError, KernelMetadata, Variant, METADATA_FORMAT,
};
use crate::asm::{self, Object};
use crate::fsutil::{read_bytes, write_atomic, ReadError};
use crate::store::remote::{ActionKey, Fetch};
use crate::store::{
    evict_least_recently_used, is_key_name, is_temporary_name, Budget, Cleaned, Evictable,
};
use crate::target::Target;
use crate::vfs::FileSource;
use camino::{Utf8Path, Utf8PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// The assembler's name and version, recorded in each kernel's metadata.
/// The cache key uses the full build identity instead
/// ([`crate::store::build_identity`]: the version and a fingerprint of the
/// compiler's sources), so a rebuilt ipub whose assembler or encoder
/// changed never reuses an object an older build compiled.
pub(super) const BUILD_IDENTITY: &str = concat!("ipub-asm ", env!("CARGO_PKG_VERSION"));

/// The largest `kernel.o` or `kernel.json` read (from the cache or by
/// `ipub kernel disasm`): an object holds at most a tile's memory.
pub(crate) const MAX_ENTRY_FILE_BYTES: u64 = 16 << 20;

/// The kernel cache's size budget: `$IPUB_KERNEL_CACHE_MAX_MB`, default
/// 256 MB (a full-chip project's kernels take a few megabytes; the budget
/// is for the entries that edits to kernel sources leave behind).
static BUDGET: Budget = Budget::new("IPUB_KERNEL_CACHE_MAX_MB", 256);

/// A kernel in the cache.
#[derive(Clone, Debug)]
pub struct CachedKernel {
    pub key: String,
    pub object_path: Utf8PathBuf,
    pub metadata_path: Utf8PathBuf,
    pub object: Object,
    pub metadata: KernelMetadata,
    /// Whether this call assembled it (a miss or a rebuilt corrupt entry).
    pub built: bool,
    /// Every file the variant's preprocessing read (source and includes).
    pub sources: Vec<Utf8PathBuf>,
}

/// The cache key of `variant` given the files its preprocessing read.
pub(crate) fn cache_key(
    files: &[(Utf8PathBuf, Arc<str>)],
    variant: &Variant,
    target: &Target,
) -> String {
    key_for_build(crate::store::build_identity(), files, variant, target)
}

/// [`cache_key`] as a build with `identity` computes it.
fn key_for_build(
    identity: &str,
    files: &[(Utf8PathBuf, Arc<str>)],
    variant: &Variant,
    target: &Target,
) -> String {
    let mut hasher = blake3::Hasher::new();
    let mut field = |bytes: &[u8]| {
        hasher.update(&(bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    };
    field(b"ipub kernel key v2");
    field(identity.as_bytes());
    field(target.name.as_bytes());
    field(variant.name.as_bytes());
    field(variant.entry.as_deref().unwrap_or("").as_bytes());
    field(&(variant.defines.len() as u64).to_le_bytes());
    for (name, value) in &variant.defines {
        field(name.as_bytes());
        field(value.as_bytes());
    }
    field(&(files.len() as u64).to_le_bytes());
    for (path, text) in files {
        field(path.as_str().as_bytes());
        field(text.as_bytes());
    }
    hasher.finalize().to_hex().to_string()
}

/// The kernel cache rooted at one directory.
#[derive(Clone, Debug)]
pub struct KernelCache {
    root: Utf8PathBuf,
    remote: Option<crate::store::remote::Remote>,
    /// Whether a failure to write the cache was reported: a cache that
    /// cannot be written warns once, not once per kernel.
    write_failure_reported: crate::logging::ReportOnce,
}

impl KernelCache {
    /// A cache whose entries live under `root/kernels/`.
    pub fn new(root: impl Into<Utf8PathBuf>) -> KernelCache {
        KernelCache {
            root: root.into(),
            remote: None,
            write_failure_reported: crate::logging::ReportOnce::default(),
        }
    }

    /// The same cache with `remote` behind it.
    pub(super) fn with_remote(
        mut self,
        remote: Option<crate::store::remote::Remote>,
    ) -> KernelCache {
        self.remote = remote;
        self
    }

    /// The cache at `$IPUB_CACHE_DIR`, `$XDG_CACHE_HOME/ipub` or
    /// `~/.cache/ipub`, with the installed remote tier
    /// ([`crate::store::install_remote`]).
    pub(crate) fn from_env() -> Option<KernelCache> {
        Some(
            KernelCache::new(crate::store::cache_root())
                .with_remote(crate::store::installed_remote()),
        )
    }

    pub(super) fn entry_dir(&self, key: &str) -> Utf8PathBuf {
        self.dir().join(key)
    }

    /// Returns the compiled `variant`, from the cache when a valid entry
    /// exists, else assembling it and storing the result.
    pub(crate) fn get_or_build(
        &self,
        fs: &dyn FileSource,
        variant: &Variant,
        target: &Target,
    ) -> Result<CachedKernel, KernelError> {
        let pre = asm::preprocess(fs, &variant.source, &variant.defines, &variant.include_dirs);
        let files_read = pre.files_read();
        let sources: Vec<Utf8PathBuf> = files_read.iter().map(|(p, _)| p.clone()).collect();
        let key = cache_key(&files_read, variant, target);
        let dir = self.entry_dir(&key);
        let object_path = dir.join("kernel.o");
        let metadata_path = dir.join("kernel.json");
        if pre.errors.is_empty() {
            match read_entry(&object_path, &metadata_path, &key) {
                Entry::Valid(object, metadata) => {
                    tracing::debug!(name = ?variant.name, key = %key, "kernel cache hit");
                    mark_used(&metadata_path);
                    return Ok(CachedKernel {
                        key,
                        object_path,
                        metadata_path,
                        object,
                        metadata: *metadata,
                        built: false,
                        sources,
                    });
                }
                Entry::Missing => {}
                Entry::Unreadable(reason) => {
                    // The cache, not the entry: its writing fails as well
                    // and says so.
                    tracing::debug!(path = %dir, reason = %reason, "cannot read the kernel cache");
                }
                Entry::Corrupt(reason) => {
                    tracing::warn!(path = %dir, reason = %reason, "corrupted kernel cache entry; rebuilding");
                    // Without its metadata the entry is a miss to every
                    // reader until the rebuilt one replaces it.
                    let _ = std::fs::remove_file(&metadata_path);
                }
            }
            if let Some((object, metadata)) = self.fetch_remote(&key, &object_path, &metadata_path)
            {
                return Ok(CachedKernel {
                    key,
                    object_path,
                    metadata_path,
                    object,
                    metadata,
                    built: false,
                    sources,
                });
            }
        }
        tracing::info!(source = %variant.source, name = ?variant.name, target = %target.name, "compiling kernel");
        let Compiled {
            object,
            object_bytes,
            metadata,
        } = compile_preprocessed(pre, variant, target, &key)?;
        let json = serde_json::to_vec_pretty(&metadata).map_err(|e| KernelError::Cache {
            path: metadata_path.clone(),
            source: std::io::Error::other(e),
        })?;
        // An unusable cache (read-only, full, not a directory) costs a
        // recompilation next time, not this build: the kernel is compiled
        // in memory either way.
        let written = write_atomic(&object_path, &object_bytes)
            .map_err(|e| (object_path.clone(), e))
            .and_then(|()| {
                write_atomic(&metadata_path, &json).map_err(|e| (metadata_path.clone(), e))
            });
        match written {
            Ok(()) => {
                tracing::info!(object = %object_path, metadata = %metadata_path, "kernel artifact created")
            }
            Err((path, error)) => {
                if self.write_failure_reported.first() {
                    tracing::warn!(%path, %error, "cannot write to the kernel cache; kernels are compiled in memory (further failures in the debug log)")
                } else {
                    tracing::debug!(%path, %error, "cannot write to the kernel cache")
                }
            }
        }
        if let Some(remote) = &self.remote {
            remote.upload(
                remote_action(&key),
                vec![
                    ("kernel.o".to_string(), Arc::from(object_bytes)),
                    ("kernel.json".to_string(), Arc::from(json)),
                ],
            );
        }
        Ok(CachedKernel {
            key,
            object_path,
            metadata_path,
            object,
            metadata,
            built: true,
            sources,
        })
    }
}

impl KernelCache {
    /// Removes every entry: the key-named directories under
    /// `root/kernels/`, their `kernel.o`, `kernel.json` and temporary
    /// files. Nothing else is touched, so a `kernels/` directory that also
    /// holds the user's files (kernel sources, when the cache root is a
    /// project directory) keeps them.
    pub(crate) fn clean(&self) -> std::io::Result<Cleaned> {
        let dir = self.dir();
        let mut cleaned = Cleaned::default();
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(cleaned),
            Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => return Ok(cleaned),
            Err(e) => return Err(e),
        };
        cleaned.found = true;
        for entry in entries {
            let entry = entry?;
            let is_dir = std::fs::symlink_metadata(entry.path()).is_ok_and(|m| m.is_dir());
            let named = entry
                .file_name()
                .to_str()
                .is_some_and(|name| is_key_name(name, ""));
            if is_dir && named {
                cleaned.remove_files(&entry.path(), is_entry_file)?;
            } else {
                cleaned.kept += 1;
            }
        }
        let _ = std::fs::remove_dir(&dir);
        Ok(cleaned)
    }

    /// The directory the entries live in.
    pub(crate) fn dir(&self) -> Utf8PathBuf {
        self.root.join("kernels")
    }

    /// Evicts down to the configured budget: `$IPUB_KERNEL_CACHE_MAX_MB`
    /// megabytes (default 256) and nothing unused for
    /// [`crate::store::MAX_UNUSED`]. Builds call this after they are done,
    /// so edits to kernel sources do not fill the disk with entries no
    /// build will read again.
    pub(crate) fn evict_to_budget(&self) -> usize {
        self.evict(BUDGET.bytes(), crate::store::MAX_UNUSED)
    }

    /// Removes whole entries unused for longer than `max_age`, then the
    /// least recently used ones until the entries hold at most
    /// `max_bytes`. An entry was last used when its newest file was
    /// modified: written, or read by a hit ([`mark_used`]). Only key-named
    /// directories and the files ipub writes in them are removed, as by
    /// [`KernelCache::clean`]. Returns the number of entries removed.
    pub(crate) fn evict(&self, max_bytes: u64, max_age: Duration) -> usize {
        evict_least_recently_used(self.entries(), max_bytes, max_age, |dir| remove_entry(dir))
    }

    /// The cache's entries: key-named directories under `kernels/` (not
    /// links), with the bytes of the files ipub wrote in them.
    fn entries(&self) -> Vec<Evictable<std::path::PathBuf>> {
        let Ok(dirs) = std::fs::read_dir(self.dir()) else {
            return Vec::new();
        };
        dirs.flatten()
            .filter(|dir| {
                dir.file_name()
                    .to_str()
                    .is_some_and(|name| is_key_name(name, ""))
            })
            .filter_map(|dir| entry_usage(dir.path()))
            .collect()
    }
}

/// Whether ipub writes a file of this name in an entry's directory.
fn is_entry_file(name: &str) -> bool {
    matches!(name, "kernel.o" | "kernel.json") || is_temporary_name(name)
}

/// The size and last use of the entry in `dir`, or `None` when `dir` is
/// not a directory.
fn entry_usage(dir: std::path::PathBuf) -> Option<Evictable<std::path::PathBuf>> {
    let metadata = std::fs::symlink_metadata(&dir).ok()?;
    if !metadata.is_dir() {
        return None;
    }
    let mut bytes = 0;
    let mut newest = None;
    for file in std::fs::read_dir(&dir).ok()?.flatten() {
        let ours = file.file_name().to_str().is_some_and(is_entry_file);
        let Ok(metadata) = std::fs::symlink_metadata(file.path()) else {
            continue;
        };
        if ours && metadata.is_file() {
            bytes += metadata.len();
            let modified = metadata.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            newest = newest.max(Some(modified));
        }
    }
    // A directory without files of ours (left by an interrupted write or
    // eviction) was last used when it last changed.
    let used = newest.unwrap_or_else(|| metadata.modified().unwrap_or(SystemTime::UNIX_EPOCH));
    Some(Evictable {
        entry: dir,
        bytes,
        used,
    })
}

/// Removes the entry in `dir`: `kernel.json` first, so a reader finds a
/// miss rather than an object without its metadata, then `kernel.o` and
/// any temporary files, then the directory if that left it empty (a file
/// ipub did not write keeps it). Says whether anything was removed.
fn remove_entry(dir: &std::path::Path) -> bool {
    let mut removed = false;
    for name in ["kernel.json", "kernel.o"] {
        removed |= remove_regular_file(&dir.join(name));
    }
    if let Ok(files) = std::fs::read_dir(dir) {
        for file in files.flatten() {
            if file.file_name().to_str().is_some_and(is_temporary_name) {
                removed |= remove_regular_file(&file.path());
            }
        }
    }
    removed | std::fs::remove_dir(dir).is_ok()
}

/// Removes `path` if it is a file (never a directory, nor what a link
/// names); says whether it did.
fn remove_regular_file(path: &std::path::Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| !m.is_dir()) && std::fs::remove_file(path).is_ok()
}

/// Records a hit as a use of the entry whose metadata is at `path`, so
/// eviction removes the least recently used entries rather than the
/// oldest written. Best effort: a read-only cache still serves hits.
fn mark_used(path: &Utf8Path) {
    let touched = std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|file| file.set_modified(SystemTime::now()));
    if let Err(error) = touched {
        tracing::debug!(%path, %error, "cannot mark a kernel cache entry as used");
    }
}

impl KernelCache {
    /// The entry from the remote tier, verified as a local entry is and
    /// written into the local cache (object first, metadata last).
    fn fetch_remote(
        &self,
        key: &str,
        object_path: &Utf8Path,
        metadata_path: &Utf8Path,
    ) -> Option<(Object, KernelMetadata)> {
        let remote = self.remote.as_ref()?;
        let what = format!("kernel {key}");
        let (object_bytes, json) = match remote.fetch(
            &remote_action(key),
            &["kernel.o", "kernel.json"],
            MAX_ENTRY_FILE_BYTES,
        ) {
            Fetch::Found(blobs) => {
                let [object, json] = <[Vec<u8>; 2]>::try_from(blobs).ok()?;
                (object, json)
            }
            Fetch::Missing => return None,
            Fetch::Corrupt(reason) => {
                remote.report_corrupt(&what, &reason);
                return None;
            }
        };
        match verify_entry(&object_bytes, &json, key) {
            Entry::Valid(object, metadata) => {
                tracing::debug!(key, "kernel from the remote cache");
                let kept = write_atomic(object_path, &object_bytes)
                    .and_then(|()| write_atomic(metadata_path, &json));
                if let Err(error) = kept {
                    tracing::debug!(%error, "cannot keep a remote kernel in the local cache");
                }
                Some((object, *metadata))
            }
            Entry::Missing | Entry::Unreadable(_) => None,
            Entry::Corrupt(reason) => {
                remote.report_corrupt(&what, &reason);
                None
            }
        }
    }
}

/// The remote action holding the kernel under `key`.
fn remote_action(key: &str) -> ActionKey {
    ActionKey::new("kernels", key.as_bytes())
}

enum Entry {
    Valid(Object, Box<KernelMetadata>),
    Missing,
    /// The entry's directory cannot be read (the cache root is a file, or
    /// not accessible): a problem of the cache, not of the entry.
    Unreadable(String),
    Corrupt(String),
}

fn read_entry(object_path: &Utf8Path, metadata_path: &Utf8Path, key: &str) -> Entry {
    // The metadata is written last: without it the entry is incomplete.
    let json = match read_bytes(metadata_path, MAX_ENTRY_FILE_BYTES) {
        Ok(json) => json,
        Err(ReadError::Missing) => return Entry::Missing,
        Err(e @ ReadError::Io(_)) => return Entry::Unreadable(format!("{metadata_path}: {e}")),
        Err(e) => return Entry::Corrupt(format!("cannot read {metadata_path}: {e}")),
    };
    let bytes = match read_bytes(object_path, MAX_ENTRY_FILE_BYTES) {
        Ok(bytes) => bytes,
        // An eviction racing with the entry's writer can leave the
        // metadata without its object: incomplete, as if unwritten.
        Err(ReadError::Missing) => return Entry::Missing,
        Err(e) => return Entry::Corrupt(format!("cannot read {object_path}: {e}")),
    };
    verify_entry(&bytes, &json, key)
}

/// Checks an entry's object and metadata bytes against each other and
/// against `key`, wherever they were read from.
fn verify_entry(bytes: &[u8], json: &[u8], key: &str) -> Entry {
    let metadata: KernelMetadata = match serde_json::from_slice(json) {
        Ok(m) => m,
        Err(e) => return Entry::Corrupt(format!("kernel.json does not parse: {e}")),
    };
    if metadata.format != METADATA_FORMAT {
        return Entry::Corrupt(format!(
            "kernel.json has format {}, not {METADATA_FORMAT}",
            metadata.format
        ));
    }
    if metadata.key != key {
        return Entry::Corrupt(format!("kernel.json names key {}", metadata.key));
    }
    if metadata.object_hash != blake3::hash(bytes).to_hex().as_str() {
        return Entry::Corrupt("kernel.o does not match the hash in kernel.json".into());
    }
    if metadata.checksum != metadata.entry_checksum(bytes) {
        return Entry::Corrupt("kernel.json does not match its checksum".into());
    }
    match Object::read(bytes) {
        Ok(object) => Entry::Valid(object, Box::new(metadata)),
        Err(e) => Entry::Corrupt(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two builds of ipub whose sources differ (same version) never share
    /// a kernel object: the key carries the store's build identity.
    #[test]
    fn the_key_changes_with_the_compilers_build_identity() {
        let files = vec![(Utf8PathBuf::from("k.S"), Arc::from("nop\n"))];
        let variant = Variant::new("k", "k.S");
        let target = &crate::target::IPU21;
        let ours = cache_key(&files, &variant, target);
        assert_eq!(
            ours,
            key_for_build(crate::store::build_identity(), &files, &variant, target)
        );
        let other = key_for_build("ipub 0.1.0 0123456789abcdef", &files, &variant, target);
        assert_ne!(ours, other);
    }

    #[test]
    fn the_budget_defaults_to_256_megabytes() {
        assert_eq!(BUDGET.megabytes(None), 256);
        assert_eq!(BUDGET.megabytes(Some("64")), 64);
    }
}
