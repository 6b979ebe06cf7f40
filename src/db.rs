//! The salsa database and its ground inputs.
//!
//! Inputs are files: project TOML files (and the files they include) and
//! kernel sources, each a [`SourceFile`] with its path, its text and a
//! revision that counts real content changes; and tensor files
//! (`.safetensors`, `.npy`) that inits read, each a [`DataFile`] holding
//! bytes and their hash. The settings of a build that are in no file (what
//! the program reads back) are the one [`BuildSettings`] input. The core never touches the disk
//! itself: it reads through a [`crate::vfs::Vfs`], which is the real
//! file system in the CLI and an in-memory map in tests.
//!
//! Inputs are created lazily the first time a query asks for a path (so a
//! project can discover its includes) and are only updated by the driver,
//! through [`Database::refresh_file`], when their contents really changed.

pub(crate) use crate::vfs::{FileBytes, FileText, ReadError};
use crate::vfs::{FileSource, OsFs, Vfs};
use camino::{Utf8Path, Utf8PathBuf};
use salsa::Setter;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A file the build depends on.
#[salsa::input(debug)]
pub struct SourceFile {
    #[returns(ref)]
    pub path: Utf8PathBuf,
    /// Why the file was not read when it is missing, not a regular file,
    /// too large or not UTF-8.
    #[returns(ref)]
    pub contents: FileText,
    /// Counts content changes; set by the driver, read by diagnostics.
    #[returns(copy)]
    pub revision: u64,
}

/// A tensor file the build reads (weights or inputs from `init = { file
/// = ... }`): its bytes with their hash, or why it was not read. Editing
/// it re-runs only the queries that read it.
#[salsa::input(debug)]
pub struct DataFile {
    #[returns(ref)]
    pub path: Utf8PathBuf,
    #[returns(ref)]
    pub contents: FileBytes,
    #[returns(copy)]
    pub revision: u64,
}

/// What the compiled program reads back to the host.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ReadBack {
    /// The outputs the project's `[check]` lists.
    #[default]
    Checked,
    /// Those and every materialised intermediate (inside repeat bodies, the
    /// last iteration's values) (`ipub run --dump-all`).
    All,
}

/// Settings of a build that no file holds.
#[salsa::input(debug)]
pub struct BuildSettings {
    #[returns(copy)]
    pub read_back: ReadBack,
}

/// Reads files through the database's inputs, so a query that reads a file
/// depends on it and re-runs when it changes.
pub(crate) struct DbFiles<'a>(pub &'a dyn Db);

impl FileSource for DbFiles<'_> {
    fn read(&self, path: &Utf8Path) -> FileText {
        self.0.file(path).contents(self.0).clone()
    }
}

/// The database trait queries take (`db: &dyn Db`).
#[salsa::db]
pub trait Db: salsa::Database {
    /// The input for `path`, created from the file system on first use.
    fn file(&self, path: &Utf8Path) -> SourceFile;

    /// The tensor file input for `path`, created on first use.
    fn data_file(&self, path: &Utf8Path) -> DataFile;

    /// The settings input of this database's builds.
    fn settings(&self) -> BuildSettings;

    /// The hooks through which queries reach results kept across
    /// processes (see [`Persistence`]).
    fn persistence(&self) -> &dyn Persistence;
}

/// The database's persistence hooks: the one way a query reaches results
/// kept across processes (the result store and the kernel cache). The
/// persisted queries go through them (`pipeline::persist`, and the kernel
/// query for the kernel cache), so the phase code does no IO of its own,
/// and they report each result they reuse, so what a build recomputed is
/// what ran minus those hits. A database without a store or a kernel cache
/// (tests) loads nothing, saves nothing and compiles kernels in memory.
pub trait Persistence {
    /// The verified payload (JSON) stored for `kind` under `key`, if any.
    fn load(&self, kind: &'static str, key: &blake3::Hash) -> Option<Vec<u8>>;

    /// Stores the payload `encode` returns for `kind` under `key`; the
    /// encoding and the write are queued until the build is done.
    fn save(&self, kind: &'static str, key: blake3::Hash, encode: crate::store::Encode);

    /// The compiled `variant` from the kernel cache, compiled and cached on
    /// a miss; `None` when there is no kernel cache.
    fn kernel(
        &self,
        files: &dyn FileSource,
        variant: &crate::kernels::Variant,
        target: &crate::target::Target,
    ) -> Option<Result<crate::kernels::cache::CachedKernel, crate::kernels::KernelError>>;

    /// Notes that `item` of `phase` was reused from the persisted results
    /// (a store or kernel cache hit that its query accepted).
    fn reused(&self, phase: &'static str, item: String);
}

/// A salsa event log for incrementality tests: the names of queries that
/// were executed, in order.
#[derive(Clone, Default)]
pub(crate) struct ExecutionLog {
    entries: Arc<Mutex<Option<Vec<String>>>>,
}

impl ExecutionLog {
    /// Starts recording (and clears what was recorded).
    pub(crate) fn start(&self) {
        *self.entries.lock().expect("log lock") = Some(Vec::new());
    }

    /// Everything recorded since the last call.
    pub(crate) fn take(&self) -> Vec<String> {
        self.entries
            .lock()
            .expect("log lock")
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    fn push(&self, entry: String) {
        if let Some(entries) = self.entries.lock().expect("log lock").as_mut() {
            entries.push(entry);
        }
    }
}

/// Every query salsa executed, by key: always recorded (unlike
/// [`ExecutionLog`]), drained after each build, which names the expensive
/// ones (`pipeline::items`).
#[derive(Clone, Default)]
pub(crate) struct ExecutedQueries {
    keys: Arc<Mutex<Vec<salsa::DatabaseKeyIndex>>>,
}

impl ExecutedQueries {
    /// Everything recorded since the last call.
    pub(crate) fn take(&self) -> Vec<salsa::DatabaseKeyIndex> {
        std::mem::take(&mut *self.keys.lock().expect("executed lock"))
    }

    fn push(&self, key: salsa::DatabaseKeyIndex) {
        self.keys.lock().expect("executed lock").push(key);
    }
}

/// What expensive queries reused from persisted results, by phase and
/// item: always recorded, drained after each build.
#[derive(Clone, Default)]
pub(crate) struct PhaseItems {
    items: Arc<Mutex<Vec<(&'static str, String)>>>,
}

impl PhaseItems {
    /// Everything recorded since the last call.
    pub(crate) fn take(&self) -> Vec<(&'static str, String)> {
        std::mem::take(&mut *self.items.lock().expect("items lock"))
    }

    fn push(&self, phase: &'static str, item: String) {
        self.items.lock().expect("items lock").push((phase, item));
    }
}

/// The one database implementation.
#[salsa::db]
#[derive(Clone)]
pub struct Database {
    storage: salsa::Storage<Self>,
    vfs: Arc<dyn Vfs>,
    files: Arc<Mutex<HashMap<Utf8PathBuf, SourceFile>>>,
    data_files: Arc<Mutex<HashMap<Utf8PathBuf, DataFile>>>,
    settings: Option<BuildSettings>,
    log: ExecutionLog,
    executed: ExecutedQueries,
    reused: PhaseItems,
    kernel_cache: Option<crate::kernels::cache::KernelCache>,
    store: Option<crate::store::Store>,
}

impl Database {
    pub fn new(vfs: Arc<dyn Vfs>) -> Self {
        let log = ExecutionLog::default();
        let executed = ExecutedQueries::default();
        let storage = salsa::Storage::new(Some(Box::new({
            let (log, executed) = (log.clone(), executed.clone());
            move |event: salsa::Event| {
                if let salsa::EventKind::WillExecute { database_key } = event.kind {
                    executed.push(database_key);
                    log.push(format!("{database_key:?}"));
                }
            }
        })));
        let mut db = Self {
            storage,
            vfs,
            files: Arc::default(),
            data_files: Arc::default(),
            settings: None,
            log,
            executed,
            reused: PhaseItems::default(),
            kernel_cache: None,
            store: None,
        };
        db.settings = Some(BuildSettings::new(&db, ReadBack::Checked));
        db
    }

    /// Sets what the compiled program reads back (an input change like
    /// any other: only what depends on the outputs recomputes).
    pub(crate) fn set_read_back(&mut self, read_back: ReadBack) {
        let settings = self.settings();
        if settings.read_back(self) != read_back {
            settings.set_read_back(self).to(read_back);
        }
    }

    /// A database over the real file system, compiling kernels through the
    /// kernel cache (`$IPUB_CACHE_DIR` or the platform cache directory).
    pub fn on_disk() -> Self {
        Self::on_disk_with(Arc::new(OsFs))
    }

    /// Like [`Database::on_disk`], reading files through `vfs` (the
    /// language server's overlay of unsaved editor text over the disk).
    pub(crate) fn on_disk_with(vfs: Arc<dyn Vfs>) -> Self {
        let mut db = Self::new(vfs);
        db.kernel_cache = crate::kernels::cache::KernelCache::from_env();
        db.store = Some(crate::store::Store::default_location());
        db
    }

    /// Persists expensive results in `store`.
    pub fn with_store(mut self, store: crate::store::Store) -> Self {
        self.store = Some(store);
        self
    }

    /// Uses `cache` for compiled kernels.
    pub fn with_kernel_cache(mut self, cache: crate::kernels::cache::KernelCache) -> Self {
        self.kernel_cache = Some(cache);
        self
    }

    /// The record of executed queries (see [`ExecutionLog`]).
    pub(crate) fn execution_log(&self) -> &ExecutionLog {
        &self.log
    }

    /// Every query executed (see [`ExecutedQueries`]).
    pub(crate) fn executed_queries(&self) -> &ExecutedQueries {
        &self.executed
    }

    /// What expensive queries reused from persisted results (see
    /// [`Persistence::reused`]).
    pub(crate) fn reused_items(&self) -> &PhaseItems {
        &self.reused
    }

    /// The persistent result store, if any: the driver flushes, evicts and
    /// reports it; queries reach it only through [`Persistence`].
    pub fn store(&self) -> Option<&crate::store::Store> {
        self.store.as_ref()
    }

    /// Re-reads `path` and updates its input if, and only if, the contents
    /// changed. Returns whether anything changed.
    pub fn refresh_file(&mut self, path: &Utf8Path) -> bool {
        let data = self
            .data_files
            .lock()
            .expect("file table lock")
            .get(path)
            .copied();
        let mut changed = false;
        if let Some(file) = data {
            let fresh = self.vfs.read_bytes(path);
            if *file.contents(self) != fresh {
                let revision = file.revision(self) + 1;
                let _previous = file.set_contents(self).to(fresh);
                file.set_revision(self).to(revision);
                changed = true;
            }
        }
        changed | self.refresh_source(path)
    }

    fn refresh_source(&mut self, path: &Utf8Path) -> bool {
        let known = self
            .files
            .lock()
            .expect("file table lock")
            .get(path)
            .copied();
        let Some(file) = known else {
            return false;
        };
        let fresh = self.vfs.read(path);
        if *file.contents(self) == fresh {
            return false;
        }
        let revision = file.revision(self) + 1;
        // The setter hands back the old contents, which are not needed.
        let _previous = file.set_contents(self).to(fresh);
        file.set_revision(self).to(revision);
        true
    }

    /// Every file the database has read so far (sources and tensor
    /// files), for watchers.
    pub fn known_files(&self) -> Vec<Utf8PathBuf> {
        let mut paths: Vec<_> = self
            .files
            .lock()
            .expect("file table lock")
            .keys()
            .chain(self.data_files.lock().expect("file table lock").keys())
            .cloned()
            .collect();
        paths.sort();
        paths.dedup();
        paths
    }

    /// The known files (sources and tensor files) whose inputs hold why
    /// they were not read (missing, not a regular file, ...) rather than
    /// contents. A watcher looks at them again after every batch of events:
    /// one that came back under a directory whose watch was lost would
    /// otherwise stay "not found" until some event named it.
    pub(crate) fn unread_files(&self) -> Vec<Utf8PathBuf> {
        let sources: Vec<(Utf8PathBuf, SourceFile)> = self
            .files
            .lock()
            .expect("file table lock")
            .iter()
            .map(|(path, file)| (path.clone(), *file))
            .collect();
        let data: Vec<(Utf8PathBuf, DataFile)> = self
            .data_files
            .lock()
            .expect("file table lock")
            .iter()
            .map(|(path, file)| (path.clone(), *file))
            .collect();
        let mut paths: Vec<Utf8PathBuf> = sources
            .into_iter()
            .filter(|(_, file)| file.contents(self).is_err())
            .map(|(path, _)| path)
            .chain(
                data.into_iter()
                    .filter(|(_, file)| file.contents(self).is_err())
                    .map(|(path, _)| path),
            )
            .collect();
        paths.sort();
        paths.dedup();
        paths
    }

    /// The tensor files the database has read so far.
    pub(crate) fn known_data_files(&self) -> Vec<Utf8PathBuf> {
        let mut paths: Vec<_> = self
            .data_files
            .lock()
            .expect("file table lock")
            .keys()
            .cloned()
            .collect();
        paths.sort();
        paths
    }

    /// Whether `path` is known as a tensor file (and not only as source).
    pub(crate) fn is_data_file(&self, path: &Utf8Path) -> bool {
        self.data_files
            .lock()
            .expect("file table lock")
            .contains_key(path)
    }
}

#[salsa::db]
impl salsa::Database for Database {}

#[salsa::db]
impl Db for Database {
    fn file(&self, path: &Utf8Path) -> SourceFile {
        let mut files = self.files.lock().expect("file table lock");
        if let Some(file) = files.get(path) {
            return *file;
        }
        let file = SourceFile::new(self, path.to_owned(), self.vfs.read(path), 0);
        files.insert(path.to_owned(), file);
        file
    }

    fn data_file(&self, path: &Utf8Path) -> DataFile {
        let mut files = self.data_files.lock().expect("file table lock");
        if let Some(file) = files.get(path) {
            return *file;
        }
        let file = DataFile::new(self, path.to_owned(), self.vfs.read_bytes(path), 0);
        files.insert(path.to_owned(), file);
        file
    }

    fn settings(&self) -> BuildSettings {
        self.settings
            .expect("the settings input is created with the database")
    }

    fn persistence(&self) -> &dyn Persistence {
        self
    }
}

impl Persistence for Database {
    fn load(&self, kind: &'static str, key: &blake3::Hash) -> Option<Vec<u8>> {
        match self.store.as_ref()?.get_payload(kind, key) {
            crate::store::Lookup::Hit(payload) => Some(payload),
            crate::store::Lookup::Miss | crate::store::Lookup::Corrupt(_) => None,
        }
    }

    fn save(&self, kind: &'static str, key: blake3::Hash, encode: crate::store::Encode) {
        if let Some(store) = &self.store {
            store.put_in_background(kind, key, encode);
        }
    }

    fn kernel(
        &self,
        files: &dyn FileSource,
        variant: &crate::kernels::Variant,
        target: &crate::target::Target,
    ) -> Option<Result<crate::kernels::cache::CachedKernel, crate::kernels::KernelError>> {
        let cache = self.kernel_cache.as_ref()?;
        Some(cache.get_or_build(files, variant, target))
    }

    fn reused(&self, phase: &'static str, item: String) {
        self.reused.push(phase, item);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfs::MemoryFs;

    #[salsa::tracked(returns(copy))]
    fn line_count(db: &dyn Db, file: SourceFile) -> usize {
        file.contents(db)
            .as_deref()
            .map_or(0, |c| c.lines().count())
    }

    #[test]
    fn unchanged_contents_do_not_invalidate() {
        let fs = MemoryFs::new();
        fs.write("a.toml", "x = 1\n");
        let mut db = Database::new(Arc::new(fs.clone()));
        let file = db.file(Utf8Path::new("a.toml"));
        db.execution_log().start();
        assert_eq!(line_count(&db, file), 1);
        assert_eq!(db.execution_log().take().len(), 1);

        assert!(!db.refresh_file(Utf8Path::new("a.toml")));
        assert_eq!(line_count(&db, file), 1);
        assert!(db.execution_log().take().is_empty());

        fs.write("a.toml", "x = 1\ny = 2\n");
        assert!(db.refresh_file(Utf8Path::new("a.toml")));
        assert_eq!(file.revision(&db), 1);
        assert_eq!(line_count(&db, file), 2);
        assert_eq!(db.execution_log().take().len(), 1);
    }

    #[test]
    fn missing_files_have_no_contents() {
        let db = Database::new(Arc::new(MemoryFs::new()));
        let file = db.file(Utf8Path::new("nope.toml"));
        assert_eq!(*file.contents(&db), Err(ReadError::Missing));
    }
}
