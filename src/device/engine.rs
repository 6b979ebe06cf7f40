//! The compute engine of the model device: each tile's supervisor runs on
//! the single-tile executor over the tile's memory.

use crate::device::model::{ComputeEngine, ComputeStats, Fault, FaultCause};
use crate::exec;
use crate::package::{Package, SegmentKind};
use crate::target::Target;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Runs compute steps by executing the tiles' machine code. Each tile's
/// code is decoded once, from the package's code segments.
pub struct ExecEngine {
    target: &'static Target,
    code: BTreeMap<u32, (u32, u32)>,
    decoded: Mutex<BTreeMap<u32, Arc<exec::Program>>>,
}

impl ExecEngine {
    pub fn new(target: &'static Target, package: &Package) -> ExecEngine {
        let code = package
            .tiles
            .iter()
            .filter_map(|t| {
                let code = t.segments.iter().filter(|s| s.kind == SegmentKind::Code);
                let start = code.clone().map(|s| s.address).min()?;
                let end = code.map(|s| s.end() as u32).max()?;
                Some((t.tile, (start, end)))
            })
            .collect();
        ExecEngine {
            target,
            code,
            decoded: Mutex::new(BTreeMap::new()),
        }
    }

    /// The tile's decoded code, decoded on its first compute step. The
    /// decoding happens outside the lock, so tiles starting together on
    /// the pool decode in parallel.
    fn program(&self, tile: u32, memory: &[u8]) -> Arc<exec::Program> {
        let lock = || self.decoded.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(program) = lock().get(&tile) {
            return Arc::clone(program);
        }
        let base = self.target.memory.tile.start;
        let program = Arc::new(match self.code.get(&tile) {
            Some(&(start, end)) => exec::Program::decode(
                &memory[(start - base) as usize..(end - base) as usize],
                start,
            ),
            None => exec::Program::empty(),
        });
        Arc::clone(lock().entry(tile).or_insert(program))
    }
}

impl ComputeEngine for ExecEngine {
    fn run_compute(
        &self,
        tile: u32,
        memory: &mut [u8],
        entry_pc: u32,
        watchdog_cycles: u64,
    ) -> Result<ComputeStats, Fault> {
        // The executor runs over the device's memory in place.
        let program = self.program(tile, memory);
        let mut executor = exec::Tile::over(self.target, tile, memory);
        executor.set_program(program);
        let result = executor.run_supervisor(entry_pc, watchdog_cycles);
        match result {
            Ok(stats) if stats.workers_ok => Ok(ComputeStats {
                cycles: stats.cycles,
                instructions: stats.supervisor_instructions + stats.worker_instructions,
            }),
            Ok(_) => Err(Fault::new(tile, FaultCause::WorkerFailed)),
            Err(fault) => {
                let context = match fault.context {
                    exec::Context::Supervisor => 0,
                    exec::Context::Worker(n) => u32::from(n) + 1,
                };
                let cause = match fault.cause {
                    exec::FaultCause::OutOfRange { addr, len } => FaultCause::OutOfRange {
                        address: addr,
                        bytes: len,
                    },
                    exec::FaultCause::Misaligned { addr, align } => FaultCause::Misaligned {
                        address: addr,
                        alignment: align,
                    },
                    exec::FaultCause::ExecuteOutsideRegion0 { addr } => {
                        FaultCause::ExecuteOutsideRegion0 { pc: addr }
                    }
                    exec::FaultCause::InvalidInstruction { word, .. } => {
                        FaultCause::BadInstruction { word }
                    }
                    exec::FaultCause::NotInterleaved { addr } => {
                        FaultCause::NotInterleaved { address: addr }
                    }
                    exec::FaultCause::Watchdog => FaultCause::Watchdog {
                        cycles: watchdog_cycles,
                    },
                };
                Err(Fault::at(tile, context, fault.pc, cause))
            }
        }
    }
}
