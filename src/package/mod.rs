//! The loadable program: what `ipub build` writes into a `.ipuexe` and what
//! a device loads and runs.
//!
//! A [`Package`] is plain data. It holds, for every tile the program uses,
//! the memory segments the loader writes; the exchange programs the
//! supervisors run between compute phases; the two host calls
//! (`initialize`, then `run`) as trees of [`Step`]s; the host bindings that
//! scatter a logical tensor's bytes into tile memory and gather them back;
//! the layout a runtime needs to attribute cycles to kernels; and the
//! validated graph with its numeric check settings, so a package can be run
//! and checked without its project.
//!
//! Invariants, established by [`Package::validate`] (which [`file::parse`]
//! and [`file::write`] both run) and relied on by the devices:
//!
//! - tiles are listed once each, in ascending order, with ids below the
//!   target's tile count; every tile a step, transfer or binding names is
//!   listed;
//! - segments lie inside the target's loadable memory, never overlap, and
//!   code lies in region 0;
//! - every step reference (exchange program, binding, compute entry point,
//!   profile entry) points at something that exists;
//! - every binding covers each byte of its tensor at least once.
//!
//! Exchange addresses are deliberately *not* checked here: like the tile
//! code they stand for, they are checked by the device when they run, which
//! reports a bad one as a fault of the tile and step.

pub(crate) mod exchange_part;
pub mod file;
pub(crate) mod file_values;
pub(crate) mod graph_check;
pub mod inspect;
pub(crate) mod limits;
pub(crate) mod profile_layout;
pub(crate) mod validate;

#[cfg(test)]
pub(crate) mod tests;

use crate::graph::{DType, Graph, TensorId};
use serde::{Deserialize, Serialize};

pub use file::{parse, read, write};
pub use profile_layout::{
    BufferKind, BufferPlace, ExchangeOp, OpEstimate, StepEstimates, SupportPlace, TileMemory,
};

/// Version of the `.ipuexe` container and its parts; bumped on any
/// incompatible change.
pub const FORMAT_VERSION: u32 = 4;

/// Identifies the producing compiler in every package it writes.
pub(crate) const COMPILER_VERSION: &str = env!("CARGO_PKG_VERSION");

/// What produced the package and what it runs on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    pub format_version: u32,
    /// The `ipub` version that wrote the package.
    pub compiler_version: String,
    /// The target name (`ipu21`).
    pub target: String,
}

impl Header {
    /// The header this build of ipub writes for `target`.
    pub(crate) fn current(target: &str) -> Header {
        Header {
            format_version: FORMAT_VERSION,
            compiler_version: COMPILER_VERSION.to_string(),
            target: target.to_string(),
        }
    }
}

/// What a segment holds; inspect reports memory by these categories.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SegmentKind {
    /// Instructions (and their literal pools); must lie in region 0.
    Code,
    /// Initialised data: weights, constants, exchange and vertex tables.
    Data,
    /// Memory the loader clears and nothing initialises (no payload).
    Zero,
}

impl SegmentKind {
    pub(crate) const fn name(self) -> &'static str {
        match self {
            SegmentKind::Code => "code",
            SegmentKind::Data => "data",
            SegmentKind::Zero => "zero",
        }
    }
}

/// One contiguous range of a tile's memory the loader writes: `data` at
/// `address`, then zeros up to `memory_size` bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    pub address: u32,
    /// Bytes the range occupies in tile memory (at least `data.len()`).
    pub memory_size: u32,
    pub kind: SegmentKind,
    /// The initialised bytes; empty for [`SegmentKind::Zero`].
    pub data: Vec<u8>,
}

impl Segment {
    /// Bytes of payload stored in the file.
    pub(crate) fn bytes(&self) -> u32 {
        self.data.len() as u32
    }

    /// Exclusive end address in tile memory.
    pub(crate) fn end(&self) -> u64 {
        u64::from(self.address) + u64::from(self.memory_size)
    }
}

/// The image of one used tile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TileImage {
    pub tile: u32,
    /// In ascending address order.
    pub segments: Vec<Segment>,
}

impl TileImage {
    /// Memory the tile's segments occupy, for one category.
    pub(crate) fn bytes_of(&self, kind: SegmentKind) -> u64 {
        self.segments
            .iter()
            .filter(|s| s.kind == kind)
            .map(|s| u64::from(s.memory_size))
            .sum()
    }
}

/// One copy out of one tile's memory into one or more tiles' memories
/// (more than one destination is a broadcast: one read, many writes).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Transfer {
    pub source_tile: u32,
    pub source_address: u32,
    pub bytes: u32,
    /// `(tile, address)` of each receiving copy.
    pub destinations: Vec<(u32, u32)>,
}

/// A statically compiled exchange phase: every transfer happens between one
/// sync and the next.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ExchangeProgram {
    /// What the phase is for (`op qkv`, `carry encoder`), for logs and dumps.
    pub label: String,
    pub transfers: Vec<Transfer>,
    /// True when the schedule uses paired 64-bit exchange.
    pub paired: bool,
    /// The compiler's estimate of the phase's cycles, from sync to the last
    /// delivered byte (without the sync itself).
    pub horizon_cycles: u64,
}

impl ExchangeProgram {
    /// Bytes read out of source tiles (a broadcast counts once).
    pub(crate) fn bytes_sent(&self) -> u64 {
        self.transfers.iter().map(|t| u64::from(t.bytes)).sum()
    }

    /// Bytes written into destination tiles (a broadcast counts per copy).
    pub(crate) fn bytes_delivered(&self) -> u64 {
        self.transfers
            .iter()
            .map(|t| u64::from(t.bytes) * t.destinations.len() as u64)
            .sum()
    }
}

/// The host calls a package provides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Call {
    /// Runs once after loading (weights in, initial exchanges).
    Initialize,
    /// Runs once per inference.
    Run,
}

impl Call {
    pub(crate) const ALL: [Call; 2] = [Call::Initialize, Call::Run];

    pub(crate) const fn name(self) -> &'static str {
        match self {
            Call::Initialize => "initialize",
            Call::Run => "run",
        }
    }
}

/// One step of a host call's control flow.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum Step {
    /// Every listed tile runs its supervisor from the entry point until it
    /// reaches the sync that ends the phase.
    Compute {
        /// The operation's name or another label for logs and profiles.
        label: String,
        /// The graph operation this step computes, when there is one.
        op: Option<String>,
        /// `(tile, supervisor entry pc)` for each participating tile.
        tiles: Vec<(u32, u32)>,
    },
    /// A sync, then the exchange program with this index.
    Exchange { program: u32 },
    /// The body runs `count` times; it is stored once.
    Repeat { count: u32, body: Vec<Step> },
    /// The host streams the binding's bytes into tile memory.
    HostWrite { binding: u32 },
    /// The host reads the binding's bytes back out of tile memory.
    HostRead { binding: u32 },
}

/// The steps of one host call.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostCall {
    pub steps: Vec<Step>,
}

impl HostCall {
    /// Exchange phases in the call as stored (a repeat's body once); the
    /// figure the seeds log as `phases=`.
    pub(crate) fn phase_count(&self) -> u64 {
        fn count(steps: &[Step]) -> u64 {
            steps
                .iter()
                .map(|s| match s {
                    Step::Exchange { .. } => 1,
                    Step::Repeat { body, .. } => count(body),
                    _ => 0,
                })
                .sum()
        }
        count(&self.steps)
    }

    /// Exchange phases the call executes (a repeat's body `count` times).
    pub(crate) fn executed_phase_count(&self) -> u64 {
        fn count(steps: &[Step]) -> u64 {
            steps
                .iter()
                .map(|s| match s {
                    Step::Exchange { .. } => 1,
                    Step::Repeat { count: n, body } => u64::from(*n).saturating_mul(count(body)),
                    _ => 0,
                })
                .fold(0u64, u64::saturating_add)
        }
        count(&self.steps)
    }

    /// Every step in pre-order (a repeat before its body), with its index
    /// in that order: the numbering [`ProfileLayout`] uses.
    pub fn preorder(&self) -> Vec<&Step> {
        fn walk<'a>(steps: &'a [Step], out: &mut Vec<&'a Step>) {
            for step in steps {
                out.push(step);
                if let Step::Repeat { body, .. } = step {
                    walk(body, out);
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.steps, &mut out);
        out
    }
}

/// A strided run of a tensor's bytes held on one tile: `count` blocks of
/// `bytes` bytes, block `i` taken from logical offset
/// `logical_offset + i * logical_stride` of the tensor's row-major bytes
/// and held at `address + i * address_stride`.
///
/// A run's size depends on the layout's structure, not on the tensor's
/// element count: a column of a transposed output is one run, however many
/// rows it has. A contiguous piece is a run with `count` 1 (its strides are
/// then 0). In tile memory the blocks of a run never overlap
/// (`address_stride >= bytes` when `count > 1`); in the tensor they may (a
/// broadcast reads the same bytes into several blocks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Piece {
    /// Byte offset of the first block into the tensor's row-major bytes.
    pub logical_offset: u64,
    /// Bytes of each block.
    pub bytes: u32,
    pub tile: u32,
    /// Tile address of the first block.
    pub address: u32,
    /// Blocks in the run (at least 1). The file omits the count of a
    /// contiguous piece and its strides, which then read as 1 and 0.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub count: u32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub logical_stride: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub address_stride: u32,
}

fn one() -> u32 {
    1
}

fn is_one(count: &u32) -> bool {
    *count == 1
}

fn is_zero<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

impl Piece {
    /// A contiguous piece: one block.
    pub(crate) fn contiguous(logical_offset: u64, bytes: u32, tile: u32, address: u32) -> Piece {
        Piece {
            logical_offset,
            bytes,
            tile,
            address,
            count: 1,
            logical_stride: 0,
            address_stride: 0,
        }
    }

    /// Each block as `(logical offset, tile address)`, in order. Only for a
    /// validated piece: validation keeps every block's arithmetic in range.
    pub(crate) fn blocks(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        (0..self.count).map(move |i| {
            (
                self.logical_offset + u64::from(i) * self.logical_stride,
                self.address + i * self.address_stride,
            )
        })
    }
}

/// Where a host-visible tensor lives: its row-major bytes, run by run.
/// Other layouts are expressed as several strided runs; a tensor
/// replicated on several tiles has overlapping runs (a host write fills
/// every copy; a host read gathers in run order, block by block, so the
/// last block covering a byte provides it).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Binding {
    pub tensor: TensorId,
    /// For a repeat's per-iteration weight: which iteration's instance.
    pub iteration: Option<u32>,
    pub dtype: DType,
    pub element_count: u64,
    pub pieces: Vec<Piece>,
}

impl Binding {
    /// Bytes of the whole logical tensor.
    pub(crate) fn byte_len(&self) -> u64 {
        self.element_count * self.dtype.size_bytes() as u64
    }
}

/// Which kernel one tile runs in one compute step.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StepKernels {
    pub call: Call,
    /// The step's index in [`HostCall::preorder`]; it is a compute step.
    pub step: u32,
    /// `(tile, index into ProfileLayout::kernels)`.
    pub tiles: Vec<(u32, u32)>,
}

/// What a runtime needs to attribute cycles: kernel names per compute step
/// and tile, and the compiler's estimate to compare the measurement with;
/// for reports, the estimates per operation and tile step, the operation
/// of each exchange step and every tile's placement (see
/// [`profile_layout`]). Packages without the report fields read as having
/// none.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ProfileLayout {
    /// The compiler's cost-model prediction for one `run` call.
    pub estimated_cycles: u64,
    /// Kernel names, each once.
    pub kernels: Vec<String>,
    pub steps: Vec<StepKernels>,
    /// Every operation of the compiled graph, in program order.
    #[serde(default)]
    pub ops: Vec<OpEstimate>,
    /// Per compute step, each tile's estimated cycles.
    #[serde(default)]
    pub estimates: Vec<StepEstimates>,
    /// The operation of each exchange step that serves one.
    #[serde(default)]
    pub exchange_ops: Vec<ExchangeOp>,
    /// Every used tile's placement, ascending by tile.
    #[serde(default)]
    pub memory: Vec<TileMemory>,
}

impl ProfileLayout {
    /// The kernel `tile` runs in compute step `step` of `call`, if recorded.
    pub fn kernel(&self, call: Call, step: u32, tile: u32) -> Option<&str> {
        let entry = self
            .steps
            .iter()
            .find(|s| s.call == call && s.step == step)?;
        let &(_, kernel) = entry.tiles.iter().find(|(t, _)| *t == tile)?;
        self.kernels.get(kernel as usize).map(String::as_str)
    }

    /// Each tile's estimated cycles in compute step `step` of `call`.
    pub(crate) fn estimates(&self, call: Call, step: u32) -> Option<&[(u32, u64)]> {
        self.estimates
            .iter()
            .find(|s| s.call == call && s.step == step)
            .map(|s| s.tiles.as_slice())
    }

    /// The operation exchange step `step` of `call` serves, if recorded.
    pub(crate) fn exchange_op(&self, call: Call, step: u32) -> Option<&str> {
        self.exchange_ops
            .iter()
            .find(|e| e.call == call && e.step == step)
            .map(|e| e.op.as_str())
    }
}

/// A complete loadable program.
#[derive(Clone, Debug, PartialEq)]
pub struct Package {
    pub header: Header,
    /// Used tiles, ascending.
    pub tiles: Vec<TileImage>,
    pub exchanges: std::sync::Arc<Vec<ExchangeProgram>>,
    pub initialize: HostCall,
    pub run: HostCall,
    pub bindings: Vec<Binding>,
    pub profile: ProfileLayout,
    /// The validated graph, with its check settings (`graph.check`).
    pub graph: Graph,
    /// The values of inputs and weights read from tensor files
    /// ([`file_values`]).
    pub file_values: Vec<FileValues>,
}

/// The device bytes of one instance of an input or weight whose values
/// come from a tensor file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileValues {
    pub tensor: TensorId,
    /// The iteration of a repeat's weight.
    pub iteration: Option<u32>,
    pub bytes: std::sync::Arc<Vec<u8>>,
}

impl Package {
    pub(crate) fn call(&self, call: Call) -> &HostCall {
        match call {
            Call::Initialize => &self.initialize,
            Call::Run => &self.run,
        }
    }

    /// The image of `tile`, when the package uses it.
    pub(crate) fn tile(&self, tile: u32) -> Option<&TileImage> {
        self.tiles
            .binary_search_by_key(&tile, |t| t.tile)
            .ok()
            .map(|i| &self.tiles[i])
    }

    /// Checks every invariant listed in the module documentation.
    pub(crate) fn validate(&self) -> Result<(), PackageError> {
        validate::package(self)
    }
}

/// Everything that can be wrong with a package file or a package.
#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    #[error("cannot read package {path}: {problem}")]
    Read {
        path: String,
        problem: crate::fsutil::ReadError,
    },
    #[error("cannot write package {path}: {problem}")]
    Write {
        path: String,
        problem: std::io::Error,
    },
    #[error("not an ipub package: the file is {length} bytes, shorter than the {needed}-byte header and part table")]
    TooShort { length: u64, needed: u64 },
    #[error("not an ipub package: the file does not start with the .ipuexe magic bytes")]
    BadMagic,
    #[error(
        "package format version {version} is newer than this ipub supports ({FORMAT_VERSION})"
    )]
    NewerVersion { version: u32 },
    #[error("package format version {version} is not supported (this ipub reads version {FORMAT_VERSION})")]
    OlderVersion { version: u32 },
    #[error("the package's part table is corrupt (its checksum does not match)")]
    CorruptTable,
    #[error("the package's part table is malformed: {message}")]
    BadTable { message: String },
    #[error("part `{part}` (bytes {offset}..{end}) lies outside the {file_length}-byte file: the file is truncated or corrupt")]
    PartOutOfBounds {
        part: String,
        offset: u64,
        end: u64,
        file_length: u64,
    },
    #[error("checksum of part `{part}` does not match: the package is corrupt")]
    ChecksumMismatch { part: String },
    #[error("the package has no `{part}` part")]
    MissingPart { part: &'static str },
    #[error("part `{part}` cannot be decoded: {message}")]
    Decode { part: &'static str, message: String },
    #[error("package targets `{target}`; this ipub supports only ipu21")]
    WrongTarget { target: String },
    #[error("invalid package ({part}): {message}")]
    Invalid { part: &'static str, message: String },
    /// A well-formed package whose run would record more than a run may:
    /// a project can ask for it (a long repeat), so it is not a compiler
    /// bug when a build meets it.
    #[error("invalid package (calls): call `{call}` {message}")]
    RunTooLong { call: &'static str, message: String },
    /// A well-formed package whose exchange programs together are more
    /// than a reader decodes: a large enough project can ask for it, so
    /// it is not a compiler bug when a build meets it.
    #[error("invalid package (exchange): the exchange programs have {message}")]
    ExchangeTooLarge { message: String },
}

impl PackageError {
    pub(crate) fn invalid(part: &'static str, message: impl Into<String>) -> PackageError {
        PackageError::Invalid {
            part,
            message: message.into(),
        }
    }
}
