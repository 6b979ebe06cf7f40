//! The embedded IPU21 model: tile memories, host exchange through bindings,
//! the exchange engine and the walk over a host call's steps.
//!
//! Tile code runs behind the [`ComputeEngine`] seam: the device hands each
//! participating tile's whole memory and supervisor entry point to the
//! engine, on rayon's pool, and collects the results in tile order. Exchange
//! is copies between tile memories: every source is read first, then the
//! receiving tiles are written in parallel (no two writes of a phase may
//! overlap, so their order cannot matter). Together with the engine's own
//! determinism this makes every result and cycle count independent of
//! thread count and scheduling.
//!
//! Cycle accounting per host call, in order: a compute step costs its
//! slowest tile; an exchange step costs one global sync plus the phase's
//! horizon (see [`exchange`]); a host write or read costs its bytes over the
//! host link. Steps do not overlap.

mod exchange;
mod memory;
mod run;

#[cfg(test)]
mod tests;

pub(crate) use memory::TileMemories;
pub(crate) use run::{records_in, CallRecord, HostBuffers};

use crate::package::{Binding, Package, PackageError};
use crate::target::{target_by_name, Target};
use std::fmt;
use std::sync::Arc;

/// What one tile's compute phase cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ComputeStats {
    /// Tile cycles from the phase's start to the tile reaching its sync.
    pub cycles: u64,
    /// Instructions executed by all of the tile's contexts.
    pub instructions: u64,
}

/// Runs one tile's code for one compute phase. The instruction-set
/// executor implements it; the device owns memory, scheduling and exchange.
pub trait ComputeEngine: Sync {
    /// Runs `tile`'s supervisor from `entry_pc` until it syncs. `memory` is
    /// the tile's whole memory: `memory[0]` is the byte at the target's
    /// memory base (0x4C000 on ipu21). A run longer than `watchdog_cycles`
    /// is a [`FaultCause::Watchdog`] fault.
    fn run_compute(
        &self,
        tile: u32,
        memory: &mut [u8],
        entry_pc: u32,
        watchdog_cycles: u64,
    ) -> Result<ComputeStats, Fault>;
}

/// Why a tile stopped, as a hardware exception would report it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum FaultCause {
    /// A load or store outside tile memory.
    OutOfRange { address: u32, bytes: u32 },
    /// A load or store not aligned to its size.
    Misaligned { address: u32, alignment: u32 },
    /// The program counter left region 0, the only executable memory.
    ExecuteOutsideRegion0 { pc: u32 },
    /// A word that does not decode to an instruction.
    BadInstruction { word: u32 },
    /// The tile ran longer than the watchdog allows.
    Watchdog { cycles: u64 },
    /// An exchange transfer reads outside the sending tile's memory.
    ExchangeFromBadAddress { address: u32, bytes: u32 },
    /// An exchange transfer writes outside the receiving tile's memory.
    ExchangeToBadAddress { address: u32, bytes: u32 },
    /// Two transfers of one phase write the same bytes, so the result would
    /// depend on their order.
    ExchangeOverlap { address: u32 },
    /// A step names a tile the package does not load (a compiler bug that
    /// validation normally catches).
    TileNotLoaded,
    /// A 128-bit or paired access outside interleaved memory (region 1).
    NotInterleaved { address: u32 },
    /// A worker ended with a non-zero exit flag (the kernel reported
    /// failure).
    WorkerFailed,
}

impl fmt::Display for FaultCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FaultCause::OutOfRange { address, bytes } => {
                write!(f, "out-of-range access ({bytes} bytes at {address:#x})")
            }
            FaultCause::Misaligned { address, alignment } => write!(
                f,
                "misaligned access ({address:#x} is not {alignment}-byte aligned)"
            ),
            FaultCause::ExecuteOutsideRegion0 { pc } => {
                write!(f, "executing outside region 0 (pc {pc:#x})")
            }
            FaultCause::BadInstruction { word } => write!(f, "bad instruction ({word:#010x})"),
            FaultCause::Watchdog { cycles } => {
                write!(f, "watchdog: still running after {cycles} cycles")
            }
            FaultCause::ExchangeFromBadAddress { address, bytes } => {
                write!(
                    f,
                    "exchange from a bad address ({bytes} bytes at {address:#x})"
                )
            }
            FaultCause::ExchangeToBadAddress { address, bytes } => {
                write!(
                    f,
                    "exchange to a bad address ({bytes} bytes at {address:#x})"
                )
            }
            FaultCause::ExchangeOverlap { address } => {
                write!(
                    f,
                    "two exchange transfers write the same bytes (at {address:#x})"
                )
            }
            FaultCause::TileNotLoaded => write!(f, "the tile has no memory loaded"),
            FaultCause::NotInterleaved { address } => write!(
                f,
                "128-bit or paired access at {address:#x} outside interleaved memory"
            ),
            FaultCause::WorkerFailed => write!(f, "a worker exited with a failure flag"),
        }
    }
}

/// A tile's exception: which tile, where it was and why it stopped.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Fault {
    pub tile: u32,
    /// 0 for the supervisor, 1..=6 for worker contexts; `None` when no
    /// context is involved (exchange).
    pub context: Option<u32>,
    pub pc: Option<u32>,
    pub cause: FaultCause,
    /// The step's label (`compute qkv`, `exchange 3 (op qkv)`); the device
    /// fills it in when an engine leaves it empty.
    pub step: Option<String>,
}

impl Fault {
    /// A fault of `tile` with no context or program counter.
    pub(super) fn new(tile: u32, cause: FaultCause) -> Fault {
        Fault {
            tile,
            context: None,
            pc: None,
            cause,
            step: None,
        }
    }

    /// A fault raised by code: `context` at `pc`.
    pub(crate) fn at(tile: u32, context: u32, pc: u32, cause: FaultCause) -> Fault {
        Fault {
            context: Some(context),
            pc: Some(pc),
            ..Fault::new(tile, cause)
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tile {}", self.tile)?;
        match self.context {
            Some(0) => write!(f, ", supervisor")?,
            Some(context) => write!(f, ", worker {context}")?,
            None => {}
        }
        if let Some(pc) = self.pc {
            write!(f, ", pc {pc:#x}")?;
        }
        write!(f, ": {}", self.cause)?;
        if let Some(step) = &self.step {
            write!(f, " in step `{step}`")?;
        }
        Ok(())
    }
}

impl std::error::Error for Fault {}

/// What can stop a load or a host call.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error(transparent)]
    Package(#[from] PackageError),
    #[error("device fault: {0}")]
    Fault(Fault),
    #[error("binding {binding} does not exist")]
    NoBinding { binding: u32 },
    #[error("no host data was given for binding {binding} (`{tensor}`)")]
    MissingInput { binding: u32, tensor: String },
    #[error("binding {binding} (`{tensor}`) takes {expected} bytes but {actual} were given")]
    InputLength {
        binding: u32,
        tensor: String,
        expected: u64,
        actual: u64,
    },
}

impl From<Fault> for DeviceError {
    fn from(fault: Fault) -> Self {
        DeviceError::Fault(fault)
    }
}

/// A loaded package on the model: the package, its target and its tiles'
/// memories.
pub struct ModelDevice {
    package: Arc<Package>,
    target: &'static Target,
    memories: TileMemories,
    /// Each exchange program of the package, checked and ordered when it
    /// first runs ([`exchange::prepare`]).
    exchanges: Vec<Option<Arc<exchange::Prepared>>>,
    /// Cycles one host call may run, all its steps together, before the
    /// watchdog fires.
    pub watchdog_cycles: u64,
    /// Told after every step of a host call: the records so far and the
    /// call's cycles so far (for a progress line).
    pub progress: Option<ProgressHook>,
}

/// A step-by-step progress report: records made, cycles so far.
pub(super) type ProgressHook = Arc<dyn Fn(u64, u64) + Send + Sync>;

/// About 1.3 s of device time: the most a watchdog allows unless the user
/// asks for more, and the watchdog of a device whose package is unknown.
pub(super) const DEFAULT_WATCHDOG_CYCLES: u64 = 2_000_000_000;

/// The default watchdog allows this many times the package's own
/// estimate of its cycles ...
pub(super) const WATCHDOG_ESTIMATE_FACTOR: u64 = 100;

/// ... and at least this many cycles (a few seconds of simulation), so a
/// package whose estimate is small still has room.
pub const MIN_WATCHDOG_CYCLES: u64 = 10_000_000;

/// The watchdog for a package that estimates `estimated_cycles` per run:
/// [`WATCHDOG_ESTIMATE_FACTOR`] times that, between
/// [`MIN_WATCHDOG_CYCLES`] and [`DEFAULT_WATCHDOG_CYCLES`]. Code that never
/// ends then stops in seconds rather than minutes; `ipub run --watchdog`
/// raises it. A package that estimates itself past the cap (a long
/// repeat) gets twice its estimate: the default never stops a program
/// that runs as long as it said it would.
pub fn default_watchdog(estimated_cycles: u64) -> u64 {
    estimated_cycles
        .saturating_mul(WATCHDOG_ESTIMATE_FACTOR)
        .clamp(MIN_WATCHDOG_CYCLES, DEFAULT_WATCHDOG_CYCLES)
        .max(estimated_cycles.saturating_mul(2))
}

impl ModelDevice {
    /// Validates `package`, gives every tile it uses a zeroed memory and
    /// writes its segments.
    pub fn load(package: Arc<Package>) -> Result<ModelDevice, DeviceError> {
        package.validate()?;
        ModelDevice::load_validated(package)
    }

    /// [`ModelDevice::load`] of a package the caller has already validated
    /// (`package::file::read` validates what it reads): validation of a
    /// full-chip package takes a noticeable part of a second, and a run
    /// should not pay for it twice.
    pub(super) fn load_validated(package: Arc<Package>) -> Result<ModelDevice, DeviceError> {
        let target =
            target_by_name(&package.header.target).ok_or_else(|| PackageError::WrongTarget {
                target: package.header.target.clone(),
            })?;
        let mut memories = TileMemories::new(target, package.tiles.iter().map(|t| t.tile));
        for image in &package.tiles {
            for segment in &image.segments {
                memories.load_segment(image.tile, segment)?;
            }
        }
        Ok(ModelDevice {
            exchanges: vec![None; package.exchanges.len()],
            package,
            target,
            memories,
            watchdog_cycles: DEFAULT_WATCHDOG_CYCLES,
            progress: None,
        })
    }

    pub(crate) fn package(&self) -> &Package {
        &self.package
    }

    pub fn target(&self) -> &'static Target {
        self.target
    }

    #[cfg(test)]
    /// The memory of `tile` (index 0 is the target's memory base), when the
    /// package uses the tile.
    pub(super) fn memory(&self, tile: u32) -> Option<&[u8]> {
        self.memories.tile(tile)
    }

    /// Scatters a logical tensor's row-major bytes into tile memory through
    /// binding `binding`'s runs, block by block.
    pub(super) fn write_binding(&mut self, binding: u32, bytes: &[u8]) -> Result<(), DeviceError> {
        // A second handle, so the binding can be read while memory is written.
        let package = Arc::clone(&self.package);
        let b = binding_of(&package, binding)?;
        if bytes.len() as u64 != b.byte_len() {
            return Err(DeviceError::InputLength {
                binding,
                tensor: tensor_name(&package, binding),
                expected: b.byte_len(),
                actual: bytes.len() as u64,
            });
        }
        for piece in &b.pieces {
            // Validation keeps every block inside the tensor's bytes.
            for (logical, address) in piece.blocks() {
                let start = logical as usize;
                let source = &bytes[start..start + piece.bytes as usize];
                self.memories.write(piece.tile, address, source)?;
            }
        }
        Ok(())
    }

    /// Gathers binding `binding`'s tensor out of tile memory as row-major
    /// bytes.
    pub(super) fn read_binding(&self, binding: u32) -> Result<Vec<u8>, DeviceError> {
        let b = binding_of(&self.package, binding)?;
        let mut out = vec![0u8; b.byte_len() as usize];
        for piece in &b.pieces {
            for (logical, address) in piece.blocks() {
                let start = logical as usize;
                out[start..start + piece.bytes as usize].copy_from_slice(self.memories.read(
                    piece.tile,
                    address,
                    piece.bytes,
                )?);
            }
        }
        Ok(out)
    }
}

fn binding_of(package: &Package, binding: u32) -> Result<&Binding, DeviceError> {
    package
        .bindings
        .get(binding as usize)
        .ok_or(DeviceError::NoBinding { binding })
}

/// The name of binding `binding`'s tensor, for messages.
pub(crate) fn tensor_name(package: &Package, binding: u32) -> String {
    package
        .bindings
        .get(binding as usize)
        .and_then(|b| package.graph.tensors.get(b.tensor.0 as usize))
        .map_or_else(|| format!("binding {binding}"), |t| t.name.clone())
}
