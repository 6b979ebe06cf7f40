//! Walking a host call's steps: compute on rayon's pool, exchange as
//! staged reads and per-tile parallel writes, repeats as loops, host streams through bindings, and one cycle
//! record per step in the profile's own shape.

use super::exchange::{exchange_cost, prepare, run};
use super::{
    tensor_name, ComputeEngine, ComputeStats, DeviceError, Fault, FaultCause, ModelDevice,
};
use crate::package::{Call, Package, Step};
use crate::profile::{StepKind, StepProfile, TileActivity};
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The bytes the host streams in and reads back, by binding index.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostBuffers {
    /// Row-major bytes for each binding a `HostWrite` step names.
    pub inputs: BTreeMap<u32, Vec<u8>>,
    /// Filled by `HostRead` steps.
    pub outputs: BTreeMap<u32, Vec<u8>>,
}

/// The cycles of one host call, step by step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallRecord {
    pub call: Call,
    /// Cycles from the call's start to its last step's end.
    pub cycles: u64,
    /// Start cycles are relative to the call's start; a repeat's body steps
    /// appear once per iteration, with the iteration.
    pub steps: Vec<StepProfile>,
}

impl ModelDevice {
    /// Runs host call `call`: every step in order, repeats looped, compute
    /// through `engine`. Results and records do not depend on the number of
    /// threads. The first fault (the lowest tile's, in a compute step) stops
    /// the call.
    pub fn run_call<E: ComputeEngine + ?Sized>(
        &mut self,
        call: Call,
        engine: &E,
        host: &mut HostBuffers,
    ) -> Result<CallRecord, DeviceError> {
        let package = Arc::clone(&self.package);
        let mut walk = Walk {
            device: self,
            package: &package,
            call,
            engine,
            host,
            clock: 0,
            records: Vec::new(),
        };
        walk.steps(&package.call(call).steps, 0, None)?;
        Ok(CallRecord {
            call,
            cycles: walk.clock,
            steps: walk.records,
        })
    }
}

struct Walk<'a, E: ?Sized> {
    device: &'a mut ModelDevice,
    package: &'a Package,
    call: Call,
    engine: &'a E,
    host: &'a mut HostBuffers,
    clock: u64,
    records: Vec<StepProfile>,
}

/// Where a step sits in the run: its pre-order index in the call and, in
/// a repeat's body, the iteration.
#[derive(Clone, Copy)]
struct At {
    index: u32,
    iteration: Option<u32>,
}

/// How many cycle records running `call` produces (one per step run, a
/// sync and an exchange for each exchange step, repeat bodies once per
/// iteration): what a progress report counts up to.
pub(crate) fn records_in(call: &crate::package::HostCall) -> u64 {
    fn records(steps: &[Step]) -> u64 {
        steps
            .iter()
            .map(|step| match step {
                Step::Exchange { .. } => 2,
                Step::Repeat { count, body } => u64::from(*count) * records(body),
                _ => 1,
            })
            .sum()
    }
    records(&call.steps)
}

/// Steps in a step's subtree, itself included: how far pre-order numbering
/// advances past it.
fn subtree_size(step: &Step) -> u32 {
    match step {
        Step::Repeat { body, .. } => 1 + body.iter().map(subtree_size).sum::<u32>(),
        _ => 1,
    }
}

impl<E: ComputeEngine + ?Sized> Walk<'_, E> {
    /// Records a step at `at` that took `cycles`, from the clock on.
    fn record(
        &mut self,
        kind: StepKind,
        at: At,
        label: String,
        op: Option<String>,
        cycles: u64,
        tiles: Vec<TileActivity>,
    ) {
        self.records.push(StepProfile {
            kind,
            label,
            op,
            iteration: at.iteration,
            index: Some(at.index),
            start_cycle: self.clock,
            cycles,
            estimated_cycles: None,
            tiles,
        });
        self.clock += cycles;
        if let Some(progress) = &self.device.progress {
            progress(self.records.len() as u64, self.clock);
        }
    }

    /// Runs `steps`, the first of which has pre-order index `first`.
    fn steps(
        &mut self,
        steps: &[Step],
        first: u32,
        iteration: Option<u32>,
    ) -> Result<(), DeviceError> {
        let mut index = first;
        for step in steps {
            self.within_watchdog(step)?;
            let at = At { index, iteration };
            match step {
                Step::Compute { label, op, tiles } => {
                    let activity = self.compute(index, label, tiles)?;
                    let cycles = activity.iter().map(|t| t.busy_cycles).max().unwrap_or(0);
                    let (label, op) = (label.clone(), op.clone());
                    self.record(StepKind::Compute, at, label, op, cycles, activity);
                }
                Step::Exchange { program } => self.exchange(at, *program)?,
                Step::Repeat { count, body } => {
                    for i in 0..*count {
                        self.steps(body, index + 1, Some(i))?;
                    }
                }
                Step::HostWrite { binding } => {
                    let name = tensor_name(self.package, *binding);
                    let bytes =
                        self.host
                            .inputs
                            .get(binding)
                            .ok_or_else(|| DeviceError::MissingInput {
                                binding: *binding,
                                tensor: name.clone(),
                            })?;
                    self.device.write_binding(*binding, bytes)?;
                    let cycles = self.host_cycles(bytes.len() as u64);
                    let label = format!("host write {name}");
                    self.record(StepKind::Host, at, label, None, cycles, vec![]);
                }
                Step::HostRead { binding } => {
                    let bytes = self.device.read_binding(*binding)?;
                    let cycles = self.host_cycles(bytes.len() as u64);
                    self.host.outputs.insert(*binding, bytes);
                    let label = format!("host read {}", tensor_name(self.package, *binding));
                    self.record(StepKind::Host, at, label, None, cycles, vec![]);
                }
            }
            index += subtree_size(step);
        }
        Ok(())
    }

    /// The watchdog covers the whole call: a step starts only while the
    /// call is within it (and a compute step's tiles get what is left), so
    /// a loop of quick steps stops as surely as a kernel that never ends.
    fn within_watchdog(&self, step: &Step) -> Result<(), DeviceError> {
        if self.clock < self.device.watchdog_cycles {
            return Ok(());
        }
        let (tile, label) = match step {
            Step::Compute { label, tiles, .. } => (
                tiles.iter().map(|&(t, _)| t).min(),
                format!("compute {label}"),
            ),
            Step::Exchange { program } => (None, format!("exchange {program}")),
            Step::Repeat { count, .. } => (None, format!("repeat x{count}")),
            Step::HostWrite { binding } | Step::HostRead { binding } => (
                None,
                format!("host {}", tensor_name(self.package, *binding)),
            ),
        };
        let tile = tile.or_else(|| self.package.tiles.first().map(|t| t.tile));
        let mut fault = Fault::new(
            tile.unwrap_or(0),
            FaultCause::Watchdog {
                cycles: self.device.watchdog_cycles,
            },
        );
        fault.step = Some(label);
        Err(DeviceError::Fault(fault))
    }

    /// Runs every tile of a compute step in parallel; results come back in
    /// ascending tile order whatever the pool did.
    fn compute(
        &mut self,
        index: u32,
        label: &str,
        tiles: &[(u32, u32)],
    ) -> Result<Vec<TileActivity>, DeviceError> {
        let run_watchdog = self.device.watchdog_cycles;
        let with_step = |mut fault: Fault| {
            fault.step.get_or_insert_with(|| format!("compute {label}"));
            // A tile stopped by what was left of the call's watchdog is
            // reported against the call's whole watchdog.
            if let FaultCause::Watchdog { cycles } = &mut fault.cause {
                *cycles = run_watchdog;
            }
            DeviceError::Fault(fault)
        };
        let mut entries = tiles.to_vec();
        entries.sort_unstable();
        let ids: Vec<u32> = entries.iter().map(|&(tile, _)| tile).collect();
        let watchdog = self.device.watchdog_cycles.saturating_sub(self.clock);
        let engine = self.engine;
        let memories = self
            .device
            .memories
            .many_mut(&ids)
            .map_err(|tile| with_step(Fault::new(tile, FaultCause::TileNotLoaded)))?;
        let results: Vec<Result<ComputeStats, Fault>> = memories
            .into_par_iter()
            .zip(entries.par_iter())
            .map(|((tile, memory), &(_, pc))| engine.run_compute(tile, memory, pc, watchdog))
            .collect();
        let mut activity = Vec::with_capacity(results.len());
        for (&(tile, _), result) in entries.iter().zip(results) {
            let stats = result.map_err(with_step)?;
            let kernel = self.package.profile.kernel(self.call, index, tile);
            activity.push(TileActivity::busy(
                tile,
                kernel.map(str::to_string),
                stats.cycles,
                stats.instructions,
            ));
        }
        Ok(activity)
    }

    /// A global sync, then exchange program `number` (the step at `at`).
    fn exchange(&mut self, at: At, number: u32) -> Result<(), DeviceError> {
        let program = self.package.exchanges.get(number as usize).ok_or_else(|| {
            crate::package::PackageError::invalid(
                "calls",
                format!("exchange program {number} does not exist"),
            )
        })?;
        let sync = u64::from(self.device.target.exchange.global_sync_cycles);
        self.record(StepKind::Sync, at, "sync".into(), None, sync, vec![]);
        let with_step = |mut fault: Fault| {
            fault
                .step
                .get_or_insert_with(|| format!("exchange {number} ({})", program.label));
            DeviceError::Fault(fault)
        };
        let prepared = match &self.device.exchanges[number as usize] {
            Some(prepared) => Arc::clone(prepared),
            None => {
                let prepared =
                    Arc::new(prepare(&self.device.memories, program).map_err(with_step)?);
                self.device.exchanges[number as usize] = Some(Arc::clone(&prepared));
                prepared
            }
        };
        run(&mut self.device.memories, &prepared).map_err(with_step)?;
        let cost = exchange_cost(self.device.target, program);
        let tiles = cost
            .tiles
            .iter()
            .zip(&cost.bytes)
            .map(|(&(tile, busy), &(bytes_in, bytes_out))| TileActivity {
                bytes_in,
                bytes_out,
                ..TileActivity::busy(tile, None, busy, 0)
            })
            .collect();
        let label = program.label.clone();
        self.record(StepKind::Exchange, at, label, None, cost.horizon, tiles);
        Ok(())
    }

    /// Cycles to move `bytes` over the host link.
    fn host_cycles(&self, bytes: u64) -> u64 {
        crate::plan::cost::host_cycles(self.device.target, bytes)
    }
}
