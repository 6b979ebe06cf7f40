//! The persistent result store: expensive query results kept across
//! processes, keyed by a blake3 hash of everything they were computed from
//! (their inputs and the compiler's build identity).
//!
//! Each entry is one file, `<root>/<kind>/<key>.json`, whose first line is a
//! header with the format version, the key the entry was written for and
//! the blake3 hash of that key and the payload that follows. Writes are
//! atomic (temporary file and rename), so two builds writing the same entry
//! at once both leave a complete file; a read that finds a truncated or
//! corrupted entry, or one written for another key (a file copied over
//! another), reports it, deletes it and misses: whoever can write the store
//! cannot make one result stand in for another.
//! The store is bounded: [`Store::evict`] removes the least recently used
//! entries beyond a size budget (a hit counts as a use), and
//! [`Store::clean`] removes everything.
//!
//! A store may have a remote tier ([`remote`]): a read that misses locally
//! asks the remote cache, verifies what it gets exactly as it verifies a
//! local file (the bytes are the same), and keeps a hit in the local store;
//! a write goes to the local store and is queued for upload. Which remote,
//! if any, comes from the command line, the environment or the user's
//! configuration ([`config`]); the commands that build install it for the
//! process ([`install_remote`]).

pub(crate) mod action;
pub(crate) mod config;
pub(crate) mod http;
pub(crate) mod remote;
pub(crate) mod sha256;

use camino::{Utf8Path, Utf8PathBuf};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::time::SystemTime;

const HEADER: &str = "ipub-store 2";

/// The largest entry read: a tile image is at most a tile's memory (twice
/// that in hex), so anything far larger is not an entry.
pub(crate) const MAX_ENTRY_BYTES: u64 = 64 << 20;

/// The identity of this build of ipub: its version and a fingerprint of its
/// sources (from `build.rs`), so results computed by another build, even
/// of the same version, are never reused.
pub(crate) fn build_identity() -> &'static str {
    concat!(
        env!("CARGO_PKG_NAME"),
        " ",
        env!("CARGO_PKG_VERSION"),
        " ",
        env!("IPUB_SOURCE_FINGERPRINT")
    )
}

/// The root of ipub's caches: `$IPUB_CACHE_DIR`, else the platform cache
/// directory (`$XDG_CACHE_HOME` or `~/.cache`) plus `ipub`, else a
/// directory under the system's temporary directory.
pub(crate) fn cache_root() -> Utf8PathBuf {
    // Unset and empty variables are treated alike.
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    if let Some(dir) = var("IPUB_CACHE_DIR") {
        return Utf8PathBuf::from(dir);
    }
    let platform = var("XDG_CACHE_HOME")
        .map(Utf8PathBuf::from)
        .or_else(|| var("HOME").map(|h| Utf8PathBuf::from(h).join(".cache")));
    match platform {
        Some(dir) => dir.join("ipub"),
        None => Utf8PathBuf::from_path_buf(std::env::temp_dir())
            .unwrap_or_else(|_| Utf8PathBuf::from("/tmp"))
            .join("ipub-cache"),
    }
}

/// A key: blake3 over labelled parts, always including the build identity.
pub(crate) fn key(parts: &[&[u8]]) -> blake3::Hash {
    let mut hasher = blake3::Hasher::new();
    hasher.update(build_identity().as_bytes());
    for part in parts {
        hasher.update(&(part.len() as u64).to_le_bytes());
        hasher.update(part);
    }
    hasher.finalize()
}

#[derive(Clone, Debug)]
pub struct Store {
    root: Utf8PathBuf,
    /// Writes queued by [`Store::put_in_background`] and not yet done.
    pending: std::sync::Arc<Pending>,
    /// Whether reads are served; a store that only writes recomputes
    /// everything and replaces what it finds.
    reading: bool,
    /// Entries served so far, so a driver can tell whether a failed build
    /// used stored results.
    hits: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// The remote tier, if any.
    remote: Option<remote::Remote>,
    /// Whether a problem with the store itself (unreadable, unwritable)
    /// was reported: an unusable store warns once, not once per entry.
    problem_reported: crate::logging::ReportOnce,
}

/// The remote cache the process's stores and kernel cache use.
static INSTALLED_REMOTE: std::sync::OnceLock<Option<remote::Remote>> = std::sync::OnceLock::new();

/// Makes `remote` the remote tier of every store and kernel cache opened
/// by [`Store::default_location`] and
/// [`KernelCache::from_env`](crate::kernels::cache::KernelCache::from_env)
/// from now on. Only the first call counts (a process builds against one
/// remote); it returns the remote in effect.
pub(crate) fn install_remote(remote: Option<remote::Remote>) -> Option<remote::Remote> {
    INSTALLED_REMOTE.get_or_init(|| remote).clone()
}

/// The remote installed for the process, if any.
pub(crate) fn installed_remote() -> Option<remote::Remote> {
    INSTALLED_REMOTE.get().cloned().flatten()
}

/// A queued write.
type Job = Box<dyn FnOnce() + Send>;

/// A result's payload, encoded when its queued write runs.
pub(crate) type Encode = Box<dyn FnOnce() -> serde_json::Result<Vec<u8>> + Send>;

/// How a reader turns a verified entry into its value.
type Decode<T> = fn(&[u8], &blake3::Hash) -> Result<T, EntryError>;

#[derive(Default)]
struct Pending {
    count: std::sync::Mutex<usize>,
    done: std::sync::Condvar,
    queued: std::sync::Mutex<Vec<Job>>,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("count", &self.count)
            .finish_non_exhaustive()
    }
}

/// What a read found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Lookup<T> {
    Hit(T),
    Miss,
    /// The entry existed but failed verification; it has been removed.
    Corrupt(String),
}

impl Store {
    pub fn new(root: impl Into<Utf8PathBuf>) -> Store {
        Store {
            root: root.into(),
            pending: std::sync::Arc::default(),
            reading: true,
            hits: std::sync::Arc::default(),
            remote: None,
            problem_reported: crate::logging::ReportOnce::default(),
        }
    }

    /// Whether a problem with the store is the first this store (and its
    /// clones) met: that one is a warning, later ones go to the debug log,
    /// so a store that cannot be used at all costs one line per build.
    fn first_problem(&self) -> bool {
        self.problem_reported.first()
    }

    /// The same store with `remote` behind it.
    pub(crate) fn with_remote(mut self, remote: Option<remote::Remote>) -> Store {
        self.remote = remote;
        self
    }

    /// The remote tier, if any.
    pub(crate) fn remote(&self) -> Option<&remote::Remote> {
        self.remote.as_ref()
    }

    /// The same store, written but never read: a build through it
    /// recomputes every result and replaces the stored ones.
    pub(crate) fn without_reads(&self) -> Store {
        Store {
            reading: false,
            hits: std::sync::Arc::default(),
            ..self.clone()
        }
    }

    /// How many entries this store (and its clones) served.
    pub(crate) fn hits(&self) -> u64 {
        self.hits.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The store under [`cache_root`], with the installed remote tier.
    /// The stores opened here share one problem report: a build opens the
    /// default store more than once (for its stamp, for its results), and
    /// an unusable store is still one warning.
    pub(crate) fn default_location() -> Store {
        static PROBLEM_REPORTED: std::sync::OnceLock<crate::logging::ReportOnce> =
            std::sync::OnceLock::new();
        Store {
            problem_reported: PROBLEM_REPORTED.get_or_init(Default::default).clone(),
            ..Store::new(cache_root().join("store")).with_remote(installed_remote())
        }
    }

    pub(crate) fn root(&self) -> &Utf8Path {
        &self.root
    }

    fn path(&self, kind: &str, key: &blake3::Hash) -> Utf8PathBuf {
        self.root.join(entry_name(kind, key))
    }

    pub(crate) fn get<T: DeserializeOwned>(&self, kind: &str, key: &blake3::Hash) -> Lookup<T> {
        self.get_with(kind, key, decode)
    }

    /// The verified payload (JSON) stored for `kind` under `key`, for a
    /// reader that decodes it itself.
    pub(crate) fn get_payload(&self, kind: &str, key: &blake3::Hash) -> Lookup<Vec<u8>> {
        self.get_with(kind, key, |bytes, key| {
            payload(bytes, key).map(<[u8]>::to_vec)
        })
    }

    fn get_with<T>(&self, kind: &str, key: &blake3::Hash, decode: Decode<T>) -> Lookup<T> {
        if !self.reading {
            return Lookup::Miss;
        }
        match self.get_local(kind, key, decode) {
            Lookup::Hit(value) => Lookup::Hit(value),
            local => match &self.remote {
                Some(remote) => self.get_remote(remote, kind, key, decode).unwrap_or(local),
                None => local,
            },
        }
    }

    fn get_local<T>(&self, kind: &str, key: &blake3::Hash, decode: Decode<T>) -> Lookup<T> {
        let path = self.path(kind, key);
        let bytes = match crate::fsutil::read_bytes(&path, MAX_ENTRY_BYTES) {
            Ok(bytes) => bytes,
            Err(crate::fsutil::ReadError::Missing) => return Lookup::Miss,
            Err(problem @ crate::fsutil::ReadError::Io(_)) => {
                // The store cannot be read here (a kind directory that is a
                // file, no permission): a problem of the store, not of
                // this entry, so it is reported once and nothing removed.
                if self.first_problem() {
                    tracing::warn!(%path, %problem, "cannot read the result store; results are recomputed (further store problems in the debug log)");
                } else {
                    tracing::debug!(%path, %problem, "cannot read the result store");
                }
                return Lookup::Miss;
            }
            Err(problem) => {
                // Not a file, or far too large: not something this store
                // wrote. Removing it lets the recomputed entry take its place.
                tracing::warn!(%path, %problem, "removing an unreadable store entry");
                // A directory in an entry's place goes too: the store owns
                // the names under its root.
                let _ = match std::fs::symlink_metadata(&path) {
                    Ok(m) if m.is_dir() => std::fs::remove_dir_all(&path),
                    _ => std::fs::remove_file(&path),
                };
                return Lookup::Corrupt(problem.to_string());
            }
        };
        match decode(&bytes, key) {
            Ok(value) => {
                self.hits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                // Eviction removes the least recently modified entries
                // first: a hit counts as a use.
                let _ = std::fs::File::options()
                    .write(true)
                    .open(&path)
                    .and_then(|f| f.set_modified(SystemTime::now()));
                Lookup::Hit(value)
            }
            Err(reason) => {
                tracing::warn!(%path, %reason, "removing corrupted store entry");
                let _ = std::fs::remove_file(&path);
                Lookup::Corrupt(reason.to_string())
            }
        }
    }

    /// The entry from the remote tier, verified as a local one is and kept
    /// in the local store; `None` when the remote has none.
    fn get_remote<T>(
        &self,
        remote: &remote::Remote,
        kind: &str,
        key: &blake3::Hash,
        decode: Decode<T>,
    ) -> Option<Lookup<T>> {
        let name = entry_name(kind, key);
        let action = remote::ActionKey::new(kind, key.as_bytes());
        let bytes = match remote.fetch(&action, &[&name], MAX_ENTRY_BYTES) {
            remote::Fetch::Found(mut blobs) => blobs.pop()?,
            remote::Fetch::Missing => return None,
            remote::Fetch::Corrupt(reason) => {
                remote.report_corrupt(&name, &reason);
                return Some(Lookup::Corrupt(reason));
            }
        };
        match decode(&bytes, key) {
            Ok(value) => {
                self.hits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                // The bytes are a valid entry: the local store keeps them
                // as they are. A store that cannot be written only costs
                // another fetch.
                if let Err(error) = crate::fsutil::write_atomic(&self.path(kind, key), &bytes) {
                    tracing::debug!(%error, "cannot keep a remote entry in the local store");
                }
                Some(Lookup::Hit(value))
            }
            Err(reason) => {
                let reason = reason.to_string();
                remote.report_corrupt(&name, &reason);
                Some(Lookup::Corrupt(reason))
            }
        }
    }

    /// The named output `output` of the remote action that holds the entry
    /// of `kind` under `key` (see [`Store::put_with_outputs`]), of at most
    /// `limit` bytes. The caller verifies it.
    pub(crate) fn remote_output(
        &self,
        kind: &str,
        key: &blake3::Hash,
        output: &str,
        limit: u64,
    ) -> Option<Vec<u8>> {
        let remote = self.remote.as_ref().filter(|_| self.reading)?;
        let action = remote::ActionKey::new(kind, key.as_bytes());
        match remote.fetch(&action, &[output], limit) {
            remote::Fetch::Found(mut blobs) => blobs.pop(),
            remote::Fetch::Missing => None,
            remote::Fetch::Corrupt(reason) => {
                remote.report_corrupt(output, &reason);
                None
            }
        }
    }

    /// Writes `value` at once (the build's results go through
    /// [`Store::put_in_background`] instead).
    #[cfg(test)]
    pub(crate) fn put<T: Serialize>(
        &self,
        kind: &str,
        key: &blake3::Hash,
        value: &T,
    ) -> std::io::Result<()> {
        self.put_with_outputs(kind, key, value, Vec::new())
    }

    /// `Store::put`, and on the remote tier the entry together with
    /// `outputs` (named byte strings a reader fetches with
    /// [`Store::remote_output`]) as one action. The upload is queued, so
    /// it never delays the caller.
    pub(crate) fn put_with_outputs<T: Serialize>(
        &self,
        kind: &str,
        key: &blake3::Hash,
        value: &T,
        outputs: Vec<(String, std::sync::Arc<[u8]>)>,
    ) -> std::io::Result<()> {
        let payload = serde_json::to_vec(value).map_err(std::io::Error::other)?;
        self.put_payload(kind, key, &payload, outputs)
    }

    /// [`Store::put_with_outputs`] of a payload already encoded.
    fn put_payload(
        &self,
        kind: &str,
        key: &blake3::Hash,
        payload: &[u8],
        outputs: Vec<(String, std::sync::Arc<[u8]>)>,
    ) -> std::io::Result<()> {
        let bytes = entry(key, payload);
        let written = crate::fsutil::write_atomic(&self.path(kind, key), &bytes);
        if let Some(remote) = &self.remote {
            let mut all = vec![(entry_name(kind, key), std::sync::Arc::from(bytes))];
            all.extend(outputs);
            remote.upload(remote::ActionKey::new(kind, key.as_bytes()), all);
        }
        written
    }

    /// Queues a `Store::put` of the payload `encode` returns: encoding
    /// and writing run on a background thread once [`Store::start_queued`]
    /// is called (the driver does so when a build is done), so a rebuild
    /// neither waits for its results to be written nor competes with them
    /// for the cores. [`Store::flush`] starts and waits for every queued
    /// write. A failed write only costs a recomputation later, so it is
    /// logged and dropped.
    pub(crate) fn put_in_background(&self, kind: &'static str, key: blake3::Hash, encode: Encode) {
        *self.pending.count.lock().expect("store queue lock") += 1;
        let store = self.clone();
        let job: Job = Box::new(move || {
            let written = encode()
                .map_err(std::io::Error::other)
                .and_then(|payload| store.put_payload(kind, &key, &payload, Vec::new()));
            if let Err(error) = written {
                if store.first_problem() {
                    tracing::warn!(kind, %error, "could not persist a result (further store problems in the debug log)");
                } else {
                    tracing::debug!(kind, %error, "could not persist a result");
                }
            }
            let mut count = store.pending.count.lock().expect("store queue lock");
            *count -= 1;
            if *count == 0 {
                store.pending.done.notify_all();
            }
        });
        self.pending
            .queued
            .lock()
            .expect("store queue lock")
            .push(job);
    }

    /// Starts every queued write, one after another on one of rayon's
    /// threads: writers in parallel contend for the lock of the directory
    /// they create their entries in (a cold full-chip build writes over a
    /// thousand tile images into one), which cost more system time than
    /// the parallel encoding saved.
    pub(crate) fn start_queued(&self) {
        let jobs = std::mem::take(&mut *self.pending.queued.lock().expect("store queue lock"));
        if !jobs.is_empty() {
            rayon::spawn(move || jobs.into_iter().for_each(|job| job()));
        }
    }

    /// Starts every queued write and waits until all are done.
    pub fn flush(&self) {
        self.start_queued();
        let mut count = self.pending.count.lock().expect("store queue lock");
        while *count > 0 {
            count = self.pending.done.wait(count).expect("store queue lock");
        }
    }

    /// Removes every entry, and the directories they leave empty. Only
    /// files named as this store names them (a key and `.json`, or a
    /// temporary file of an interrupted write) are removed: the root may
    /// be a directory the user also keeps other files in, and those stay.
    pub(crate) fn clean(&self) -> std::io::Result<Cleaned> {
        let mut cleaned = Cleaned::default();
        let kinds = match std::fs::read_dir(&self.root) {
            Ok(kinds) => kinds,
            Err(e) if missing(&e) => return Ok(cleaned),
            Err(e) => return Err(e),
        };
        cleaned.found = true;
        for kind in kinds {
            let kind = kind?.path();
            if std::fs::symlink_metadata(&kind).is_ok_and(|m| m.is_dir()) {
                cleaned.remove_files(&kind, |name| {
                    is_key_name(name, ".json") || is_temporary_name(name)
                })?;
            } else {
                cleaned.kept += 1;
            }
        }
        // Fails, harmlessly, when something foreign is left.
        let _ = std::fs::remove_dir(&self.root);
        Ok(cleaned)
    }

    /// Evicts down to the configured budget: `$IPUB_STORE_MAX_MB`
    /// megabytes (default 1024) and nothing unused for [`MAX_UNUSED`].
    /// Builds call this after saving their results, so the store stays
    /// bounded without `ipub clean`.
    pub(crate) fn evict_to_budget(&self) -> usize {
        self.evict(STORE_BUDGET.bytes(), MAX_UNUSED)
    }

    /// Removes entries older than `max_age`, then the least recently
    /// modified ones until the store holds at most `max_bytes`. Returns the
    /// number of entries removed.
    pub(crate) fn evict(&self, max_bytes: u64, max_age: std::time::Duration) -> usize {
        evict_least_recently_used(self.entries(), max_bytes, max_age, |path| {
            std::fs::remove_file(path).is_ok()
        })
    }

    /// The store's entries: files named as it names them. A file of
    /// another name is not one (nor is a write in progress) and is never
    /// evicted.
    fn entries(&self) -> Vec<Evictable<std::path::PathBuf>> {
        let mut found = Vec::new();
        let Ok(kinds) = std::fs::read_dir(&self.root) else {
            return found;
        };
        for kind in kinds.flatten() {
            let Ok(files) = std::fs::read_dir(kind.path()) else {
                continue;
            };
            for file in files.flatten() {
                let Ok(metadata) = file.metadata() else {
                    continue;
                };
                let named = file
                    .file_name()
                    .to_str()
                    .is_some_and(|name| is_key_name(name, ".json"));
                if !metadata.is_file() || !named {
                    continue;
                }
                found.push(Evictable {
                    entry: file.path(),
                    bytes: metadata.len(),
                    used: metadata.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                });
            }
        }
        found
    }
}

/// How long an entry of the store or the kernel cache may go unused
/// before a build's eviction removes it, whatever the size budget.
pub(crate) const MAX_UNUSED: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);

/// The store's size budget: `$IPUB_STORE_MAX_MB`, default 1024 MB.
static STORE_BUDGET: Budget = Budget::new("IPUB_STORE_MAX_MB", 1024);

/// A cache's size budget, in megabytes, from an environment variable: the
/// default when unset or empty, and when not a whole number of megabytes,
/// which is reported once per process (builds under `ipub watch` and
/// `ipub lsp` evict after each rebuild, so a warning per build would
/// repeat forever).
pub(crate) struct Budget {
    variable: &'static str,
    default_megabytes: u64,
    reported: std::sync::atomic::AtomicBool,
}

impl Budget {
    pub(crate) const fn new(variable: &'static str, default_megabytes: u64) -> Budget {
        Budget {
            variable,
            default_megabytes,
            reported: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The budget in bytes, as the environment sets it now.
    pub(crate) fn bytes(&self) -> u64 {
        megabytes_to_bytes(self.megabytes(std::env::var(self.variable).ok().as_deref()))
    }

    /// The budget in megabytes given the variable's `value`.
    pub(crate) fn megabytes(&self, value: Option<&str>) -> u64 {
        let Some(value) = value.filter(|v| !v.is_empty()) else {
            return self.default_megabytes;
        };
        value.trim().parse().unwrap_or_else(|_| {
            if !self
                .reported
                .swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                tracing::warn!(
                    "{}=`{value}` is not a whole number of megabytes; using {}",
                    self.variable,
                    self.default_megabytes
                );
            }
            self.default_megabytes
        })
    }
}

/// `megabytes` in bytes; a budget too large to count in bytes is no limit.
pub(crate) fn megabytes_to_bytes(megabytes: u64) -> u64 {
    megabytes.saturating_mul(1024 * 1024)
}

/// An entry of the store or of the kernel cache as eviction sees it: what
/// to remove, its size on disk and when it was last used.
pub(crate) struct Evictable<T> {
    pub entry: T,
    pub bytes: u64,
    pub used: SystemTime,
}

/// Removes the entries unused for longer than `max_age`, then the least
/// recently used ones until those left hold at most `max_bytes`. `remove`
/// removes one entry and says whether it did (a concurrent build or clean
/// may have got there first). Returns how many were removed.
pub(crate) fn evict_least_recently_used<T>(
    mut entries: Vec<Evictable<T>>,
    max_bytes: u64,
    max_age: std::time::Duration,
    mut remove: impl FnMut(&T) -> bool,
) -> usize {
    entries.sort_by_key(|e| std::cmp::Reverse(e.used));
    let now = SystemTime::now();
    let mut total = 0u64;
    let mut removed = 0;
    for candidate in entries {
        let too_old = now
            .duration_since(candidate.used)
            .is_ok_and(|age| age > max_age);
        if too_old || total.saturating_add(candidate.bytes) > max_bytes {
            if remove(&candidate.entry) {
                removed += 1;
            }
        } else {
            total += candidate.bytes;
        }
    }
    removed
}

/// An entry's name in the store and in its remote action: the path below
/// the store's root.
fn entry_name(kind: &str, key: &blake3::Hash) -> String {
    format!("{kind}/{}.json", key.to_hex())
}

/// Whether `name` is a key as ipub writes it (64 lowercase hex digits)
/// followed by `suffix`: the name of a store entry (`.json`) or of a
/// kernel cache entry's directory (no suffix).
pub(crate) fn is_key_name(name: &str, suffix: &str) -> bool {
    name.strip_suffix(suffix).is_some_and(|key| {
        key.len() == 64 && key.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// Whether `name` is that of the temporary file an atomic write creates
/// next to its target (`.tmp` and six characters) and that a killed
/// process leaves behind.
pub(crate) fn is_temporary_name(name: &str) -> bool {
    name.strip_prefix(".tmp")
        .is_some_and(|rest| rest.len() == 6 && rest.bytes().all(|b| b.is_ascii_alphanumeric()))
}

fn missing(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
    )
}

/// What a clean removed and what it left.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Cleaned {
    /// Whether the directory cleaned existed at all.
    pub found: bool,
    /// Files removed, and their bytes.
    pub files: u64,
    pub bytes: u64,
    /// Files and directories left because ipub does not write them.
    pub kept: u64,
}

impl Cleaned {
    /// Removes the files in `dir` whose names `ours` accepts (never
    /// following a link out of it, never descending), counts the rest as
    /// kept, then removes `dir` if that left it empty.
    pub(crate) fn remove_files(
        &mut self,
        dir: &std::path::Path,
        ours: impl Fn(&str) -> bool,
    ) -> std::io::Result<()> {
        let files = match std::fs::read_dir(dir) {
            Ok(files) => files,
            Err(e) if missing(&e) => return Ok(()),
            Err(e) => return Err(e),
        };
        for file in files {
            let file = file?;
            let Ok(metadata) = std::fs::symlink_metadata(file.path()) else {
                continue;
            };
            let named = file.file_name().to_str().is_some_and(&ours);
            if !named || metadata.is_dir() {
                self.kept += 1;
                continue;
            }
            match std::fs::remove_file(file.path()) {
                Ok(()) => {
                    self.files += 1;
                    self.bytes += metadata.len();
                }
                // A concurrent build or clean got there first.
                Err(e) if missing(&e) => {}
                Err(e) => return Err(e),
            }
        }
        let _ = std::fs::remove_dir(dir);
        Ok(())
    }
}

/// An entry's bytes: the header line (version, key, checksum), then the
/// payload.
pub fn entry(key: &blake3::Hash, payload: &[u8]) -> Vec<u8> {
    let mut bytes = format!(
        "{HEADER} {} {}\n",
        key.to_hex(),
        checksum(key, payload).to_hex()
    )
    .into_bytes();
    bytes.extend_from_slice(payload);
    bytes
}

/// The key an entry's header says it was written for, if it has one.
pub fn entry_key(bytes: &[u8]) -> Option<blake3::Hash> {
    let line = bytes.split(|&b| b == b'\n').next()?;
    let fields = std::str::from_utf8(line).ok()?.strip_prefix(HEADER)?;
    blake3::Hash::from_hex(fields.split_whitespace().next()?).ok()
}

/// The checksum an entry carries: over the key it was written for and its
/// payload, so neither can be swapped without the other.
fn checksum(key: &blake3::Hash, payload: &[u8]) -> blake3::Hash {
    let mut hasher = blake3::Hasher::new();
    hasher.update(key.as_bytes());
    hasher.update(payload);
    hasher.finalize()
}

/// Why an entry's bytes are not a value stored under the key asked for.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum EntryError {
    #[error("no header line")]
    NoHeader,
    #[error("header is not text")]
    HeaderNotText,
    /// The header's first 40 characters.
    #[error("unknown header `{0}`")]
    UnknownHeader(String),
    #[error("the header has no key and checksum")]
    NoKey,
    /// The key the entry names (at most 64 characters of it).
    #[error("the entry was written for key {0}, not for the key it is filed under")]
    OtherKey(String),
    #[error("checksum mismatch")]
    Checksum,
    #[error("unreadable payload: {0}")]
    Payload(String),
}

/// Reads an entry's bytes as the value stored under `key`: the header must
/// name this version and `key`, and the checksum must cover both.
pub(crate) fn decode<T: DeserializeOwned>(
    bytes: &[u8],
    key: &blake3::Hash,
) -> Result<T, EntryError> {
    let payload = payload(bytes, key)?;
    serde_json::from_slice(payload).map_err(|e| EntryError::Payload(e.to_string()))
}

/// An entry's payload, once its header names this version and `key` and
/// its checksum covers both.
fn payload<'a>(bytes: &'a [u8], key: &blake3::Hash) -> Result<&'a [u8], EntryError> {
    let newline = bytes
        .iter()
        .position(|&b| b == b'\n')
        .ok_or(EntryError::NoHeader)?;
    let header = std::str::from_utf8(&bytes[..newline]).map_err(|_| EntryError::HeaderNotText)?;
    let fields = header
        .strip_prefix(HEADER)
        .and_then(|rest| rest.strip_prefix(' '))
        .ok_or_else(|| EntryError::UnknownHeader(header.chars().take(40).collect()))?;
    let (written_for, sum) = fields.split_once(' ').ok_or(EntryError::NoKey)?;
    if written_for != key.to_hex().as_str() {
        return Err(EntryError::OtherKey(written_for.chars().take(64).collect()));
    }
    let payload = &bytes[newline + 1..];
    if checksum(key, payload).to_hex().as_str() != sum {
        return Err(EntryError::Checksum);
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = Utf8PathBuf::from_path_buf(dir.path().join("store")).expect("utf-8");
        (dir, Store::new(root))
    }

    #[test]
    fn round_trips_and_misses_on_other_keys() {
        let (_dir, store) = store();
        let k = key(&[b"a"]);
        store.put("plans", &k, &vec![1u32, 2, 3]).expect("put");
        assert_eq!(
            store.get::<Vec<u32>>("plans", &k),
            Lookup::Hit(vec![1, 2, 3])
        );
        assert_eq!(store.get::<Vec<u32>>("plans", &key(&[b"b"])), Lookup::Miss);
        assert_ne!(
            key(&[b"ab"]),
            key(&[b"a", b"b"]),
            "parts are length-delimited"
        );
    }

    #[test]
    fn corrupted_and_truncated_entries_are_reported_and_removed() {
        let (_dir, store) = store();
        let k = key(&[b"x"]);
        store.put("plans", &k, &"value").expect("put");
        let path = store.path("plans", &k);
        let mut bytes = std::fs::read(&path).expect("read");
        let last = bytes.len() - 2;
        bytes[last] ^= 0x20;
        std::fs::write(&path, &bytes).expect("corrupt");
        assert!(matches!(
            store.get::<String>("plans", &k),
            Lookup::Corrupt(_)
        ));
        assert!(!path.exists());
        store.put("plans", &k, &"value").expect("put");
        let bytes = std::fs::read(&path).expect("read");
        std::fs::write(&path, &bytes[..bytes.len() / 2]).expect("truncate");
        assert!(matches!(
            store.get::<String>("plans", &k),
            Lookup::Corrupt(_)
        ));
    }

    /// A directory where an entry belongs is removed like any other
    /// unreadable entry, so the recomputed entry can take its place.
    #[test]
    fn a_directory_in_an_entrys_place_is_removed() {
        let (_dir, store) = store();
        let k = key(&[b"d"]);
        let path = store.path("plans", &k);
        std::fs::create_dir_all(path.join("inside")).expect("mkdir");
        assert!(matches!(
            store.get::<String>("plans", &k),
            Lookup::Corrupt(_)
        ));
        assert!(!path.exists());
        store.put("plans", &k, &"value").expect("put");
        assert_eq!(
            store.get::<String>("plans", &k),
            Lookup::Hit("value".to_string())
        );
    }

    #[test]
    fn an_entry_filed_under_another_key_is_corrupt_and_removed() {
        let (_dir, store) = store();
        let (a, b) = (key(&[b"a"]), key(&[b"b"]));
        store.put("plans", &a, &"for a").expect("put");
        store.put("plans", &b, &"for b").expect("put");
        std::fs::copy(store.path("plans", &a), store.path("plans", &b)).expect("copy");
        let Lookup::Corrupt(reason) = store.get::<String>("plans", &b) else {
            panic!("a copied entry must not be served");
        };
        assert!(reason.starts_with(&format!("the entry was written for key {}", a.to_hex())));
        assert!(!store.path("plans", &b).exists());
        assert_eq!(
            store.get::<String>("plans", &a),
            Lookup::Hit("for a".into())
        );
        // The key cannot be rewritten without the checksum.
        let bytes = std::fs::read(store.path("plans", &a)).expect("read");
        let text = String::from_utf8(bytes).expect("text");
        let forged = text.replace(a.to_hex().as_str(), b.to_hex().as_str());
        std::fs::write(store.path("plans", &b), forged).expect("forge");
        assert_eq!(
            store.get::<String>("plans", &b),
            Lookup::Corrupt("checksum mismatch".into())
        );
        // Something that is not a file is removed as well.
        std::fs::create_dir_all(store.path("plans", &b)).expect("mkdir");
        assert!(matches!(
            store.get::<String>("plans", &b),
            Lookup::Corrupt(_)
        ));
    }

    #[test]
    fn a_store_without_reads_misses_and_counts_no_hits() {
        let (_dir, store) = store();
        let k = key(&[b"x"]);
        store.put("plans", &k, &1u32).expect("put");
        assert_eq!(store.get::<u32>("plans", &k), Lookup::Hit(1));
        assert_eq!(store.hits(), 1);
        let writer = store.without_reads();
        assert_eq!(writer.get::<u32>("plans", &k), Lookup::Miss);
        assert_eq!(writer.hits(), 0);
        writer.put("plans", &k, &2u32).expect("put");
        assert_eq!(store.get::<u32>("plans", &k), Lookup::Hit(2));
    }

    #[test]
    fn eviction_keeps_the_newest_entries_within_the_budget() {
        let (_dir, store) = store();
        for i in 0..5u8 {
            store.put("k", &key(&[&[i]]), &vec![i; 100]).expect("put");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let one = std::fs::metadata(store.path("k", &key(&[&[0]])))
            .expect("meta")
            .len();
        let removed = store.evict(one * 2, std::time::Duration::from_secs(3600));
        assert_eq!(removed, 3);
        assert!(matches!(
            store.get::<Vec<u8>>("k", &key(&[&[4]])),
            Lookup::Hit(_)
        ));
        assert_eq!(store.get::<Vec<u8>>("k", &key(&[&[0]])), Lookup::Miss);
        assert!(store.clean().expect("clean").bytes > 0);
        assert!(!store.root().exists());
    }

    /// A store's root may hold files the user put there: cleaning and
    /// evicting remove only what the store wrote.
    #[test]
    fn clean_and_eviction_leave_foreign_files_alone() {
        let (_dir, store) = store();
        let k = key(&[b"mine"]);
        store.put("plans", &k, &1u32).expect("put");
        let stray = store.root().join("plans").join(".tmpAb12Cd");
        std::fs::write(&stray, b"half a write").expect("write");
        let foreign = [
            store.root().join("notes.txt"),
            store.root().join("plans").join("README"),
            store.root().join("mine").join("x"),
            store
                .root()
                .join("plans")
                .join(format!("{}.txt", k.to_hex())),
        ];
        for file in &foreign {
            std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
            std::fs::write(file, b"the user's").expect("write");
        }
        assert_eq!(store.evict(0, std::time::Duration::from_secs(3600)), 1);
        store.put("plans", &k, &1u32).expect("put");
        let cleaned = store.clean().expect("clean");
        assert!(cleaned.found);
        assert_eq!((cleaned.files, cleaned.kept), (2, 4));
        assert!(!store.path("plans", &k).exists() && !stray.exists());
        for file in &foreign {
            assert_eq!(std::fs::read(file).expect("kept"), b"the user's");
        }
        let (_empty, absent) = self::store();
        assert_eq!(absent.clean().expect("clean"), Cleaned::default());
    }

    #[test]
    fn a_hit_counts_as_a_use_for_eviction() {
        let (_dir, store) = store();
        for i in 0..3u8 {
            store.put("k", &key(&[&[i]]), &vec![i; 100]).expect("put");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        // The oldest entry is read, so the middle one is evicted instead.
        assert!(matches!(
            store.get::<Vec<u8>>("k", &key(&[&[0]])),
            Lookup::Hit(_)
        ));
        let one = std::fs::metadata(store.path("k", &key(&[&[0]])))
            .expect("meta")
            .len();
        assert_eq!(
            store.evict(one * 2, std::time::Duration::from_secs(3600)),
            1
        );
        assert_eq!(store.get::<Vec<u8>>("k", &key(&[&[1]])), Lookup::Miss);
        assert!(matches!(
            store.get::<Vec<u8>>("k", &key(&[&[0]])),
            Lookup::Hit(_)
        ));
    }

    #[test]
    fn the_budget_is_a_whole_number_of_megabytes_or_the_default() {
        let budget = Budget::new("IPUB_TEST_MAX_MB", 1024);
        assert_eq!(budget.megabytes(None), 1024);
        assert_eq!(budget.megabytes(Some("")), 1024);
        assert_eq!(budget.megabytes(Some("0")), 0);
        assert_eq!(budget.megabytes(Some(" 12 ")), 12);
        for bad in ["abc", "-1", "1.5"] {
            assert_eq!(budget.megabytes(Some(bad)), 1024, "{bad}");
        }
        assert_eq!(megabytes_to_bytes(2), 2 << 20);
        assert_eq!(megabytes_to_bytes(u64::MAX), u64::MAX);
    }

    /// A store whose kind directory is a file fails every write: the first
    /// failure is the store's one warning, the rest are not.
    #[test]
    fn an_unusable_store_reports_one_problem() {
        let (_dir, store) = store();
        std::fs::create_dir_all(store.root()).expect("mkdir");
        std::fs::write(store.root().join("plans"), b"a file").expect("write");
        assert!(store.first_problem());
        assert!(!store.clone().first_problem());
        assert!(!store.without_reads().first_problem());
    }

    #[test]
    fn concurrent_writers_of_one_entry_leave_a_valid_entry() {
        let (_dir, store) = store();
        let k = key(&[b"same"]);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| store.put("k", &k, &vec![7u64; 1000]).expect("put"));
            }
        });
        assert_eq!(store.get::<Vec<u64>>("k", &k), Lookup::Hit(vec![7; 1000]));
    }
}
