//! The single-tile executor: runs a tile's supervisor and six workers over
//! the tile's memory, following the instruction set of `book/src/isa.md`.
//!
//! Workers are simulated one after another, each to completion when it is
//! started: their AMP state is private and the model gives no ordering
//! between workers inside a compute step, so this is exact and
//! deterministic. Cycles follow the barrel rule from issue counts: every
//! issue slot of a context is six tile cycles, the supervisor's timeline
//! waits for a free context on `run`, cannot issue while six workers run,
//! and waits for all of them at `sync`.
//!
//! Faults are data ([`Fault`]): bad programs never panic the host.

mod amp;
mod memory;
mod program;
#[cfg(test)]
mod tests;
mod thread;

pub(crate) use memory::Memory;
pub(crate) use program::Program;
pub(crate) use thread::Counts;

use crate::target::Target;
use std::fmt;
use std::sync::Arc;
use thread::{Env, Event, Thread};

/// The six worker contexts of a tile.
pub(crate) const WORKERS: usize = 6;

/// Which context faulted or ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Context {
    Supervisor,
    Worker(u8),
}

impl fmt::Display for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Context::Supervisor => f.write_str("supervisor"),
            Context::Worker(n) => write!(f, "worker {n}"),
        }
    }
}

/// Why execution stopped, like a hardware exception.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FaultCause {
    #[error("access of {len} bytes at {addr:#07x} is outside tile memory")]
    OutOfRange { addr: u32, len: u32 },
    #[error("access at {addr:#07x} is not {align}-byte aligned")]
    Misaligned { addr: u32, align: u32 },
    #[error("execution at {addr:#07x}, outside region 0 or unaligned")]
    ExecuteOutsideRegion0 { addr: u32 },
    #[error("invalid instruction {word:#010x}: {reason}")]
    InvalidInstruction { word: u32, reason: &'static str },
    #[error("128-bit or paired access at {addr:#07x} is outside interleaved memory")]
    NotInterleaved { addr: u32 },
    #[error("watchdog: the step ran past its cycle limit")]
    Watchdog,
}

/// A fault with where it happened.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("tile {tile}, {context}, pc {pc:#07x}: {cause}")]
pub struct Fault {
    pub tile: u32,
    pub context: Context,
    pub pc: u32,
    pub cause: FaultCause,
}

/// How a compute step ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepEnd {
    /// `sync tag`: the device performs the exchange the tag names, then
    /// resumes the supervisor at [`StepStats::next_pc`].
    Sync { tag: u16 },
    /// `halt`: the tile program is finished.
    Halt,
}

/// What one compute step did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepStats {
    /// Tile cycles from the step's start to the end of its `sync`/`halt`.
    pub cycles: u64,
    pub supervisor_instructions: u64,
    pub worker_instructions: u64,
    pub worker_issues: u64,
    pub amp_macs: u64,
    /// Every worker of the step ended with `exitz` of a zero register.
    pub workers_ok: bool,
    pub end: StepEnd,
    /// Where the supervisor continues after the step.
    pub next_pc: u32,
}

/// What a directly run worker function did.
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WorkerStats {
    pub counts: Counts,
    /// Its issue slots × 6: the cycles it takes with the barrel full.
    pub cycles: u64,
    /// Whether it ended with `exitz` of a zero register.
    pub exit_ok: bool,
}

/// One tile: memory (owned, or borrowed from a device with
/// [`Tile::over`]), program, supervisor and workers.
pub struct Tile<B = Vec<u8>> {
    target: Target,
    id: u32,
    memory: Memory<B>,
    program: Arc<Program>,
    supervisor: Thread,
    workers: Vec<Thread>,
    /// Cleared when a worker of the current step exits with a non-zero
    /// register.
    step_workers_ok: bool,
    /// `$wstatus`: `step_workers_ok` latched by the last `sync`/`halt`.
    wstatus: bool,
}

impl Tile {
    pub fn new(target: &Target, id: u32) -> Tile {
        Tile::over(target, id, vec![0; target.memory.tile.len() as usize])
    }
}

impl<B: AsRef<[u8]> + AsMut<[u8]>> Tile<B> {
    /// A tile whose memory is `bytes` (index 0 at the target's memory
    /// base), with fresh contexts.
    pub(crate) fn over(target: &Target, id: u32, bytes: B) -> Tile<B> {
        Tile {
            target: *target,
            id,
            memory: Memory::over(target, bytes),
            program: Arc::new(Program::empty()),
            supervisor: Thread::new(Context::Supervisor),
            workers: (0..WORKERS as u8)
                .map(|n| Thread::new(Context::Worker(n)))
                .collect(),
            step_workers_ok: true,
            wstatus: true,
        }
    }

    /// Installs decoded code. Instructions inside it run from the decoded
    /// form; anywhere else in region 0 they are decoded from memory as they
    /// run (slower, same result unless the code was overwritten).
    pub(crate) fn set_program(&mut self, program: Arc<Program>) {
        self.program = program;
    }

    /// Writes code words at `addr` and installs their decoded program.
    pub fn load_code(&mut self, addr: u32, words: &[u32]) -> Result<(), FaultCause> {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        self.write_bytes(addr, &bytes)?;
        self.program = Arc::new(Program::decode(&bytes, addr));
        Ok(())
    }

    /// Copies bytes into memory at `addr`.
    pub fn write_bytes(&mut self, addr: u32, bytes: &[u8]) -> Result<(), FaultCause> {
        let base = self.memory.base();
        let len = bytes.len() as u32;
        let at = addr
            .checked_sub(base)
            .filter(|at| (*at as usize) + bytes.len() <= self.memory.bytes().len())
            .ok_or(FaultCause::OutOfRange { addr, len })?;
        self.memory.bytes_mut()[at as usize..at as usize + bytes.len()].copy_from_slice(bytes);
        Ok(())
    }

    /// Reads bytes from memory at `addr`.
    pub fn read_bytes(&self, addr: u32, len: u32) -> Result<&[u8], FaultCause> {
        let at = addr
            .checked_sub(self.memory.base())
            .filter(|at| (*at as usize) + len as usize <= self.memory.bytes().len())
            .ok_or(FaultCause::OutOfRange { addr, len })?;
        Ok(&self.memory.bytes()[at as usize..(at + len) as usize])
    }

    #[cfg(test)]
    pub(crate) fn supervisor_regs(&self) -> &thread::Regs {
        &self.supervisor.regs
    }

    #[cfg(test)]
    /// A worker's registers as it left them.
    pub(crate) fn worker_regs(&self, worker: usize) -> Option<&thread::Regs> {
        self.workers.get(worker).map(|w| &w.regs)
    }

    fn env(&mut self) -> (Env<'_>, &mut Thread, &mut [Thread]) {
        let region0 = (
            self.target.memory.region0.start,
            self.target.memory.region0.end,
        );
        let env = Env {
            memory: self.memory.view(),
            program: &self.program,
            tile: self.id,
            wstatus: self.wstatus,
            region0,
        };
        (env, &mut self.supervisor, &mut self.workers)
    }

    fn fault(&self, thread: &Thread, cause: FaultCause) -> Fault {
        Fault {
            tile: self.id,
            context: thread.context,
            pc: thread.pc,
            cause,
        }
    }

    #[cfg(test)]
    /// Runs worker context `worker` from `entry` with `$m0 = state` until it
    /// exits, as a kernel test harness: no supervisor is involved.
    pub(crate) fn run_worker(
        &mut self,
        worker: usize,
        entry: u32,
        state: u32,
        watchdog_cycles: u64,
    ) -> Result<WorkerStats, Fault> {
        let slots = u64::from(self.target.barrel_slots);
        let worker = worker.min(WORKERS - 1);
        let (mut env, _, workers) = self.env();
        let thread = &mut workers[worker];
        thread.start(entry, state);
        let result = thread.run(&mut env, watchdog_cycles / slots);
        let thread = &self.workers[worker];
        match result {
            Ok(_) => Ok(WorkerStats {
                counts: thread.counts,
                cycles: thread.counts.issues * slots,
                exit_ok: thread.exit_ok,
            }),
            Err(cause) => Err(self.fault(thread, cause)),
        }
    }

    /// Runs the supervisor from `entry_pc` until it executes `sync` or
    /// `halt` with all workers finished: one compute step.
    pub fn run_supervisor(
        &mut self,
        entry_pc: u32,
        watchdog_cycles: u64,
    ) -> Result<StepStats, Fault> {
        let slots = u64::from(self.target.barrel_slots);
        self.supervisor.pc = entry_pc;
        self.supervisor.counts = Counts::default();
        // When each worker context becomes free, in cycles from the start.
        let mut free_at = [0u64; WORKERS];
        let mut time = 0u64;
        let (mut worker_instructions, mut worker_issues, mut amp_macs) = (0, 0, 0);
        loop {
            let issued_before = self.supervisor.counts.issues;
            let budget = watchdog_cycles.saturating_sub(time) / slots + issued_before;
            let (mut env, supervisor, _) = self.env();
            let event = supervisor.run(&mut env, budget);
            let event = match event {
                Ok(event) => event,
                Err(cause) => return Err(self.fault(&self.supervisor, cause)),
            };
            time += (self.supervisor.counts.issues - issued_before) * slots;
            let mut launch = |tile: &mut Tile<B>, n: usize, entry: u32, state: u32, start: u64| {
                let (mut env, _, workers) = tile.env();
                let thread = &mut workers[n];
                thread.start(entry, state);
                let budget = watchdog_cycles.saturating_sub(start) / slots;
                if let Err(cause) = thread.run(&mut env, budget) {
                    return Err(tile.fault(&tile.workers[n], cause));
                }
                let counts = tile.workers[n].counts;
                tile.step_workers_ok &= tile.workers[n].exit_ok;
                worker_instructions += counts.instructions;
                worker_issues += counts.issues;
                amp_macs += counts.amp_macs;
                Ok(start + counts.issues * slots)
            };
            match event {
                Event::Run { entry, state } => {
                    // Wait for the earliest free context, then take the
                    // lowest-numbered one free at that time.
                    let earliest = free_at.iter().copied().min().unwrap_or(0);
                    time = time.max(earliest);
                    let n = free_at.iter().position(|&f| f <= time).unwrap_or(0);
                    free_at[n] = launch(self, n, entry, state, time)?;
                }
                Event::Runall { entry, state } => {
                    time = time.max(free_at.iter().copied().max().unwrap_or(0));
                    for (n, free) in free_at.iter_mut().enumerate() {
                        *free = launch(self, n, entry, state, time)?;
                    }
                }
                Event::Sync(_) | Event::Halt => {
                    time = time.max(free_at.iter().copied().max().unwrap_or(0));
                    if time > watchdog_cycles {
                        return Err(self.fault(&self.supervisor, FaultCause::Watchdog));
                    }
                    let end = match event {
                        Event::Sync(tag) => StepEnd::Sync { tag },
                        _ => StepEnd::Halt,
                    };
                    self.wstatus = self.step_workers_ok;
                    self.step_workers_ok = true;
                    return Ok(StepStats {
                        workers_ok: self.wstatus,
                        cycles: time,
                        supervisor_instructions: self.supervisor.counts.instructions,
                        worker_instructions,
                        worker_issues,
                        amp_macs,
                        end,
                        next_pc: self.supervisor.pc,
                    });
                }
                Event::Exit => {
                    // Only workers exit; the supervisor cannot execute `exitz`.
                    return Err(self.fault(
                        &self.supervisor,
                        FaultCause::InvalidInstruction {
                            word: 0,
                            reason: "exit in the supervisor",
                        },
                    ));
                }
            }
            // The supervisor shares the six barrel slots: with every worker
            // busy it cannot issue until the first one finishes.
            if free_at.iter().all(|&f| f > time) {
                time = free_at.iter().copied().min().unwrap_or(time);
            }
        }
    }
}
