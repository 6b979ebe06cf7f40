//! The remote tier: a cache server speaking the Bazel remote-cache HTTP
//! protocol (bazel-remote, nginx with WebDAV, and the like) behind the
//! local store and the kernel cache.
//!
//! # The mapping onto the protocol
//!
//! A result ipub persists is an *action* with named output files. Its
//! action key is `blake3("ipub remote action v1", kind, key)` over the
//! length-prefixed kind (`plans`, `stamps`, `kernels`) and
//! the result's own key (which already covers ipub's build identity), as
//! 64 hex digits: `PUT /ac/<action key>` stores an `ActionResult` message
//! ([`super::action`]) listing the outputs, and each output's bytes go to
//! `PUT /cas/<sha256 of the bytes>` first, so a server that checks the
//! digests of what it stores (bazel-remote does) accepts them, and one that
//! checks that an action's blobs exist finds them. An output's bytes are
//! exactly those of the local entry: a store entry's file (header, key,
//! checksum, payload), a kernel's `kernel.o` and `kernel.json`.
//!
//! A read fetches the action result, then the blobs it names, checks each
//! blob against the SHA-256 it was asked for, and hands the bytes to the
//! same verification a local entry goes through; nothing is trusted for
//! having come from the server.
//!
//! # Failure
//!
//! The remote never fails a build. The first failed request (unreachable,
//! timed out, an error status, an answer that is not HTTP) marks the
//! remote down for the rest of the process, with one warning; from then
//! on reads miss at once and uploads are dropped. A server that refuses
//! uploads (401, 403, 405) is read from and no longer written to, again
//! with one warning. Corrupt entries are reported once (the first with a
//! warning, later ones in the debug log), ignored and recomputed, and the
//! recomputed result is uploaded over them.
//!
//! Uploads run on up to [`UPLOADERS`] background threads, taken in the
//! order they were queued, each putting its blobs before the action result
//! that names them; [`Remote::flush`] waits for them, up to a bound.

use super::action::{self, OutputFile};
use super::http::{Client, HttpError, Response};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How many uploads run at once: a few connections hide a remote
/// server's latency without crowding it.
const UPLOADERS: usize = 4;

/// The largest action result read: ipub's list one or two outputs.
pub(super) const MAX_ACTION_BYTES: u64 = 64 << 10;

/// The key of an action in the protocol's `/ac/` namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ActionKey(blake3::Hash);

impl ActionKey {
    /// The action key of the result of `kind` under `key` (see the module
    /// documentation).
    pub(crate) fn new(kind: &str, key: &[u8]) -> ActionKey {
        let mut hasher = blake3::Hasher::new();
        hasher.update(b"ipub remote action v1");
        for part in [kind.as_bytes(), key] {
            hasher.update(&(part.len() as u64).to_le_bytes());
            hasher.update(part);
        }
        ActionKey(hasher.finalize())
    }
}

impl std::fmt::Display for ActionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.to_hex().as_str())
    }
}

/// What a read of an action's outputs found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Fetch {
    /// The named outputs' bytes, in the order asked for.
    Found(Vec<Vec<u8>>),
    /// No such action, a blob it names is gone, or the remote is down.
    Missing,
    /// The server answered with something that is not such an action.
    Corrupt(String),
}

/// A remote cache; clones share its connections, state and uploads.
#[derive(Clone, Debug)]
pub(crate) struct Remote {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    client: Client,
    read_only: bool,
    down: AtomicBool,
    writes_refused: AtomicBool,
    corrupt_reported: AtomicBool,
    stats: Stats,
    uploads: Mutex<Uploads>,
    uploads_changed: Condvar,
}

#[derive(Debug, Default)]
struct Uploads {
    queue: VecDeque<Upload>,
    /// Uploads taken from the queue and not finished.
    busy: usize,
    /// Upload threads running.
    workers: usize,
}

#[derive(Debug)]
struct Upload {
    action: ActionKey,
    outputs: Vec<(String, Arc<[u8]>)>,
}

/// What crossed the wire, for the summary a build prints.
#[derive(Debug, Default)]
struct Stats {
    fetched: AtomicU64,
    fetched_bytes: AtomicU64,
    uploaded: AtomicU64,
    uploaded_bytes: AtomicU64,
    misses: AtomicU64,
    corrupt: AtomicU64,
    dropped: AtomicU64,
}

/// A copy of [`Stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Summary {
    /// Actions read whole, and the bytes of their outputs.
    pub fetched: u64,
    pub fetched_bytes: u64,
    /// Actions written whole, and the bytes of their outputs.
    pub uploaded: u64,
    pub uploaded_bytes: u64,
    pub misses: u64,
    pub corrupt: u64,
    /// Uploads not made: the remote was down, refused them or the flush
    /// bound passed.
    pub dropped: u64,
    pub down: bool,
}

impl Remote {
    pub(crate) fn new(client: Client, read_only: bool) -> Remote {
        Remote {
            inner: Arc::new(Inner {
                client,
                read_only,
                down: AtomicBool::new(false),
                writes_refused: AtomicBool::new(false),
                corrupt_reported: AtomicBool::new(false),
                stats: Stats::default(),
                uploads: Mutex::default(),
                uploads_changed: Condvar::new(),
            }),
        }
    }

    /// The server, as messages show it (never with credentials).
    pub(crate) fn endpoint(&self) -> &super::http::Endpoint {
        self.inner.client.endpoint()
    }

    pub(super) fn is_down(&self) -> bool {
        self.inner.down.load(Ordering::Relaxed)
    }

    pub(crate) fn summary(&self) -> Summary {
        let stats = &self.inner.stats;
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        Summary {
            fetched: get(&stats.fetched),
            fetched_bytes: get(&stats.fetched_bytes),
            uploaded: get(&stats.uploaded),
            uploaded_bytes: get(&stats.uploaded_bytes),
            misses: get(&stats.misses),
            corrupt: get(&stats.corrupt),
            dropped: get(&stats.dropped),
            down: self.is_down(),
        }
    }

    /// Reads the outputs `names` of `action`, each of at most `limit`
    /// bytes.
    pub(crate) fn fetch(&self, action: &ActionKey, names: &[&str], limit: u64) -> Fetch {
        let fetch = self.fetch_uncounted(action, names, limit);
        let stats = &self.inner.stats;
        match &fetch {
            Fetch::Found(blobs) => {
                stats.fetched.fetch_add(1, Ordering::Relaxed);
                let bytes: usize = blobs.iter().map(Vec::len).sum();
                stats
                    .fetched_bytes
                    .fetch_add(bytes as u64, Ordering::Relaxed);
            }
            // Reads of a remote that is down are not misses of its own.
            Fetch::Missing if self.is_down() => {}
            Fetch::Missing => {
                stats.misses.fetch_add(1, Ordering::Relaxed);
            }
            Fetch::Corrupt(_) => {}
        }
        fetch
    }

    fn fetch_uncounted(&self, action: &ActionKey, names: &[&str], limit: u64) -> Fetch {
        let Some(result) = self.get(&format!("/ac/{action}"), MAX_ACTION_BYTES) else {
            return Fetch::Missing;
        };
        let outputs = match action::decode(&result) {
            Ok(outputs) => outputs,
            Err(error) => return Fetch::Corrupt(format!("the action result: {error}")),
        };
        let mut blobs = Vec::with_capacity(names.len());
        for name in names {
            let Some(output) = outputs.iter().find(|o| o.path == *name) else {
                return Fetch::Corrupt(format!("the action result has no output `{name}`"));
            };
            if output.size > limit {
                return Fetch::Corrupt(format!(
                    "output `{name}` is {} bytes, more than the {limit} allowed",
                    output.size
                ));
            }
            let Some(blob) = self.get(&format!("/cas/{}", output.sha256), limit) else {
                // An action whose blob was evicted is a miss like any other.
                return Fetch::Missing;
            };
            if blob.len() as u64 != output.size {
                return Fetch::Corrupt(format!(
                    "output `{name}` is {} bytes, not the {} its action result says",
                    blob.len(),
                    output.size
                ));
            }
            // The blob was asked for by its digest: bytes with another
            // digest are not the output, whatever checks of its own kind
            // they might pass (a kernel's metadata has none beyond this).
            if !super::sha256::sha256_hex(&blob).eq_ignore_ascii_case(&output.sha256) {
                return Fetch::Corrupt(format!(
                    "output `{name}` does not match its SHA-256 {}",
                    output.sha256
                ));
            }
            blobs.push(blob);
        }
        Fetch::Found(blobs)
    }

    /// A body, `None` on a miss or any failure (which marks the remote
    /// down).
    fn get(&self, path: &str, limit: u64) -> Option<Vec<u8>> {
        if self.is_down() {
            return None;
        }
        match self.inner.client.get(path, limit) {
            Ok(Response { status: 200, body }) => {
                tracing::debug!(remote = %self.endpoint(), path, bytes = body.len(), "remote cache hit");
                Some(body)
            }
            Ok(Response { status: 404, .. }) => {
                tracing::debug!(remote = %self.endpoint(), path, "remote cache miss");
                None
            }
            Ok(Response { status, .. }) => {
                self.fail(&status_problem(status));
                None
            }
            // A blob larger than it may be is the entry's fault, not the
            // server's: it is reported as such by the caller's checks.
            Err(HttpError::TooLarge { limit }) => {
                self.report_corrupt(path, &format!("larger than {limit} bytes"));
                None
            }
            Err(error) => {
                self.fail(&error.to_string());
                None
            }
        }
    }

    /// Marks the remote down, with the process's one warning about it.
    fn fail(&self, problem: &str) {
        if !self.inner.down.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "the remote cache at {} failed ({problem}); building locally without it for the rest of this run",
                self.endpoint()
            );
        }
    }

    /// Reports an entry that failed verification: the first with a
    /// warning, the rest in the debug log.
    pub(crate) fn report_corrupt(&self, what: &str, reason: &str) {
        self.inner.stats.corrupt.fetch_add(1, Ordering::Relaxed);
        if !self.inner.corrupt_reported.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "a remote cache entry is corrupt ({what}: {reason}); it is ignored and recomputed"
            );
        } else {
            tracing::debug!(what, reason, "another corrupt remote cache entry");
        }
    }

    /// Whether uploads are made at all.
    fn writes(&self) -> bool {
        !self.inner.read_only
            && !self.is_down()
            && !self.inner.writes_refused.load(Ordering::Relaxed)
    }

    /// Queues an upload of `outputs` as the action `action`; it runs on
    /// the upload thread. Nothing is queued when the remote is read-only,
    /// down, or refusing writes.
    pub(crate) fn upload(&self, action: ActionKey, outputs: Vec<(String, Arc<[u8]>)>) {
        if !self.writes() {
            if !self.inner.read_only {
                self.inner.stats.dropped.fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        let mut uploads = self.inner.uploads.lock().expect("upload queue lock");
        uploads.queue.push_back(Upload { action, outputs });
        // A new thread when more uploads wait than threads are free to take
        // them.
        if uploads.workers < UPLOADERS && uploads.queue.len() > uploads.workers - uploads.busy {
            uploads.workers += 1;
            let remote = self.clone();
            std::thread::spawn(move || remote.upload_worker());
        }
    }

    fn upload_worker(&self) {
        loop {
            let next = {
                let mut uploads = self.inner.uploads.lock().expect("upload queue lock");
                match uploads.queue.pop_front() {
                    Some(upload) => {
                        uploads.busy += 1;
                        upload
                    }
                    None => {
                        uploads.workers -= 1;
                        self.inner.uploads_changed.notify_all();
                        return;
                    }
                }
            };
            self.send(next);
            self.inner.uploads.lock().expect("upload queue lock").busy -= 1;
            self.inner.uploads_changed.notify_all();
        }
    }

    /// Makes one upload: the blobs, then the action result naming them.
    fn send(&self, upload: Upload) {
        if !self.writes() {
            self.inner.stats.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let mut listed = Vec::new();
        let mut bytes = 0;
        for (path, blob) in &upload.outputs {
            let sha256 = super::sha256::sha256_hex(blob);
            if !self.put(&format!("/cas/{sha256}"), blob) {
                self.inner.stats.dropped.fetch_add(1, Ordering::Relaxed);
                return;
            }
            bytes += blob.len() as u64;
            listed.push(OutputFile {
                path: path.clone(),
                sha256,
                size: blob.len() as u64,
            });
        }
        if !self.put(&format!("/ac/{}", upload.action), &action::encode(&listed)) {
            self.inner.stats.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let stats = &self.inner.stats;
        stats.uploaded.fetch_add(1, Ordering::Relaxed);
        stats.uploaded_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    fn put(&self, path: &str, body: &[u8]) -> bool {
        if !self.writes() {
            return false;
        }
        match self.inner.client.put(path, body) {
            Ok(Response {
                status: 200 | 201 | 204,
                ..
            }) => {
                tracing::debug!(remote = %self.endpoint(), path, bytes = body.len(), "uploaded to the remote cache");
                true
            }
            Ok(Response {
                status: status @ (401 | 403 | 405 | 501),
                ..
            }) => {
                if !self.inner.writes_refused.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        "the remote cache at {} refuses uploads (HTTP {status}); reading from it only",
                        self.endpoint()
                    );
                }
                false
            }
            Ok(Response { status, .. }) => {
                self.fail(&status_problem(status));
                false
            }
            Err(error) => {
                self.fail(&error.to_string());
                false
            }
        }
    }

    /// Waits until every queued upload is done, or `bound` has passed;
    /// uploads still queued then are dropped (with a warning), and one in
    /// progress is left to its own time-out. Returns whether all finished.
    pub(crate) fn flush(&self, bound: Duration) -> bool {
        let deadline = Instant::now() + bound;
        let mut uploads = self.inner.uploads.lock().expect("upload queue lock");
        while !uploads.queue.is_empty() || uploads.busy > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let dropped = uploads.queue.len();
                uploads.queue.clear();
                self.inner
                    .stats
                    .dropped
                    .fetch_add(dropped as u64, Ordering::Relaxed);
                tracing::warn!(
                    "uploads to the remote cache at {} took longer than {bound:?}; {dropped} not made",
                    self.endpoint()
                );
                return false;
            }
            uploads = self
                .inner
                .uploads_changed
                .wait_timeout(uploads, left)
                .expect("upload queue lock")
                .0;
        }
        true
    }
}

fn status_problem(status: u16) -> String {
    match status {
        401 | 403 => format!(
            "HTTP {status}: access refused; check IPUB_REMOTE_CACHE_TOKEN or IPUB_REMOTE_CACHE_USER and IPUB_REMOTE_CACHE_PASSWORD"
        ),
        _ => format!("HTTP {status}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::http::{Endpoint, Timeouts};
    use expect_test::expect;

    /// A server whose connections are never accepted: they complete in
    /// the listen backlog, and nothing ever answers.
    #[test]
    fn flushing_waits_a_bounded_time_for_a_stalled_server() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = listener.local_addr().expect("address");
        let endpoint = Endpoint::parse(&format!("http://{address}"), None).expect("url");
        let timeouts = Timeouts {
            connect: Duration::from_millis(500),
            request: Duration::from_millis(700),
            per_mib: Duration::from_millis(100),
        };
        let remote = Remote::new(Client::new(endpoint, timeouts), false);
        for i in 0..20u8 {
            let blob: Arc<[u8]> = Arc::from(vec![i; 100]);
            remote.upload(ActionKey::new("plans", &[i]), vec![("x".into(), blob)]);
        }
        let started = Instant::now();
        assert!(!remote.flush(Duration::from_millis(200)));
        assert!(started.elapsed() < Duration::from_millis(600));
        // The uploads under way end at their own time-out, which marks the
        // remote down; nothing was stored and nothing more is tried.
        assert!(remote.flush(Duration::from_secs(5)));
        let summary = remote.summary();
        assert!(summary.down);
        assert_eq!((summary.uploaded, summary.dropped), (0, 20));
        remote.upload(ActionKey::new("plans", b"late"), Vec::new());
        assert_eq!(remote.summary().dropped, 21);
        drop(listener);
    }

    /// The mapping is part of what teams share: pinned, so a change is a
    /// deliberate one (and bumps the version in the key's label).
    #[test]
    fn action_keys_are_pinned() {
        let key = blake3::hash(b"an entry");
        expect!["5ba5a570b42b1d81bee8c43c94d6818e5c7eb2a12d9d78aa95c75d83ff1376cf"]
            .assert_eq(&ActionKey::new("plans", key.as_bytes()).to_string());
        assert_ne!(
            ActionKey::new("plans", key.as_bytes()),
            ActionKey::new("stamps", key.as_bytes())
        );
        assert_ne!(ActionKey::new("ab", b"c"), ActionKey::new("a", b"bc"));
    }
}
