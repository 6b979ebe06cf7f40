//! Tests of the model's memory, host streams, exchange engine and step
//! walk. Compute runs through [`CopyPlusOne`], a test double that stands in
//! for the instruction-set executor.

use super::exchange::exchange_cost;
use super::*;
use crate::package::tests::sample;
use crate::package::{
    Call, ExchangeProgram, HostCall, Piece, Segment, SegmentKind, Step, TileImage, Transfer,
};
use crate::profile::StepProfile;
use crate::target::IPU21;
use expect_test::{expect, Expect};
use std::fmt::Write as _;

const BASE: u32 = 0x4C000;
const WEIGHTS: u32 = 0x80000;
const WORK: u32 = 0x90000;

/// A test double for the executor. Each tile's "program" is three
/// little-endian words at its entry point, `source, destination, length`:
/// it copies `length` bytes from `source` to `destination`, adding one to
/// each byte. It costs 6 cycles per word moved plus the tile id, so tiles
/// differ; an address outside memory is a fault at the entry point.
struct CopyPlusOne;

impl ComputeEngine for CopyPlusOne {
    fn run_compute(
        &self,
        tile: u32,
        memory: &mut [u8],
        entry_pc: u32,
        _watchdog_cycles: u64,
    ) -> Result<ComputeStats, Fault> {
        let out_of_range = |address, bytes| {
            Fault::at(tile, 0, entry_pc, FaultCause::OutOfRange { address, bytes })
        };
        let word = |memory: &[u8], address: u32| -> Result<u32, Fault> {
            let at = address.checked_sub(BASE).ok_or(out_of_range(address, 4))? as usize;
            let bytes = memory.get(at..at + 4).ok_or(out_of_range(address, 4))?;
            Ok(u32::from_le_bytes(bytes.try_into().expect("four bytes")))
        };
        let source = word(memory, entry_pc)?;
        let destination = word(memory, entry_pc + 4)?;
        let length = word(memory, entry_pc + 8)?;
        let span = |address: u32| {
            let start = address.checked_sub(BASE)? as usize;
            let end = start.checked_add(length as usize)?;
            (end <= memory.len()).then_some(start..end)
        };
        let from = span(source).ok_or(out_of_range(source, length))?;
        let to = span(destination).ok_or(out_of_range(destination, length))?;
        let data: Vec<u8> = memory[from].iter().map(|b| b.wrapping_add(1)).collect();
        memory[to].copy_from_slice(&data);
        let words = u64::from(length).div_ceil(4);
        Ok(ComputeStats {
            cycles: 6 * (words + 3) + u64::from(tile),
            instructions: words + 3,
        })
    }
}

fn program_words(source: u32, destination: u32, length: u32) -> Vec<u8> {
    [source, destination, length]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect()
}

/// The sample package with runnable programs: tiles 0 and 1 increment
/// their half of `x` in place; tiles 2 and 5 turn what the exchange brought
/// them into their half of `y`. So `y` is the first half of `x` plus two,
/// twice (tile 5 receives only tile 0's half).
fn runnable(tweak: impl FnOnce(&mut Package)) -> Arc<Package> {
    let mut package = sample();
    for image in &mut package.tiles {
        let words = if image.tile < 2 {
            program_words(WORK, WORK, 32)
        } else {
            program_words(WORK + 0x80, WORK + 0x40, 32)
        };
        image.segments[0].data[16..28].copy_from_slice(&words);
    }
    tweak(&mut package);
    Arc::new(package)
}

fn bytes(seed: u64, length: usize) -> Vec<u8> {
    let mut rng = Rng(seed);
    (0..length).map(|_| rng.next() as u8).collect()
}

/// xorshift64*: deterministic test data without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn inputs() -> HostBuffers {
    let mut host = HostBuffers::default();
    host.inputs.insert(0, bytes(1, 64));
    host.inputs.insert(1, bytes(2, 128));
    host
}

fn dump(record: &CallRecord) -> String {
    let mut out = format!("{} {} cycles\n", record.call.name(), record.cycles);
    for StepProfile {
        kind,
        label,
        iteration,
        index,
        start_cycle,
        cycles,
        tiles,
        ..
    } in &record.steps
    {
        let iteration = iteration.map_or(String::new(), |i| format!(" #{i}"));
        let index = index.map_or(String::new(), |i| format!("@{i} "));
        let _ = write!(
            out,
            "  {start_cycle:>5} +{cycles:<4} {index}{kind:?} {label}{iteration}"
        );
        for tile in tiles {
            let kernel = tile.kernel.as_deref().unwrap_or("-");
            let _ = write!(out, " [{} {kernel} {}", tile.tile, tile.busy_cycles);
            if tile.bytes_in + tile.bytes_out > 0 {
                let _ = write!(out, " in {} out {}", tile.bytes_in, tile.bytes_out);
            }
            out.push(']');
        }
        out.push('\n');
    }
    out
}

#[test]
fn runs_calls_through_bindings_compute_and_exchange() {
    let mut device = ModelDevice::load(runnable(|_| {})).expect("load");
    let mut host = inputs();
    let init = device
        .run_call(Call::Initialize, &CopyPlusOne, &mut host)
        .expect("initialize");
    let run = device
        .run_call(Call::Run, &CopyPlusOne, &mut host)
        .expect("run");
    expect![[r#"
        initialize 3 cycles
              0 +3    @0 Host host write w
        run 2132 cycles
              0 +2    @0 Host host write x
              2 +67   @1 Compute y [0 gemm_f16_k8 66] [1 gemm_f16_k8 67]
             69 +600  @3 Sync sync #0
            669 +16   @3 Exchange op y #0 [0 - 9 in 0 out 32] [1 - 9 in 0 out 32] [2 - 16 in 64 out 0] [5 - 8 in 32 out 0]
            685 +71   @4 Compute y #0 [2 add_f16 68] [5 add_f16 71]
            756 +600  @3 Sync sync #1
           1356 +16   @3 Exchange op y #1 [0 - 9 in 0 out 32] [1 - 9 in 0 out 32] [2 - 16 in 64 out 0] [5 - 8 in 32 out 0]
           1372 +71   @4 Compute y #1 [2 add_f16 68] [5 add_f16 71]
           1443 +600  @3 Sync sync #2
           2043 +16   @3 Exchange op y #2 [0 - 9 in 0 out 32] [1 - 9 in 0 out 32] [2 - 16 in 64 out 0] [5 - 8 in 32 out 0]
           2059 +71   @4 Compute y #2 [2 add_f16 68] [5 add_f16 71]
           2130 +2    @5 Host host read y
    "#]]
    .assert_eq(&(dump(&init) + &dump(&run)));
    let x = &host.inputs[&0];
    let half: Vec<u8> = x[..32].iter().map(|b| b.wrapping_add(2)).collect();
    assert_eq!(host.outputs[&2], [half.clone(), half].concat());
    // The replicated weight reached both of its tiles.
    for tile in [0, 1] {
        let memory = device.memory(tile).expect("tile");
        let at = (WEIGHTS - BASE) as usize;
        assert_eq!(&memory[at..at + 128], host.inputs[&1].as_slice());
    }
}

#[test]
fn host_streams_round_trip_through_scattered_pieces() {
    // `x` as sixteen 4-byte pieces, alternating tiles, in reverse address
    // order: a layout far from row-major.
    let package = runnable(|p| {
        p.bindings[0].pieces = (0..16u32)
            .map(|i| Piece::contiguous(u64::from(i) * 4, 4, i % 2, WORK + 0x100 + (15 - i) * 4))
            .collect();
    });
    let mut device = ModelDevice::load(package).expect("load");
    let x = bytes(9, 64);
    device.write_binding(0, &x).expect("write");
    assert_eq!(device.read_binding(0).expect("read"), x);
    let tile1 = device.memory(1).expect("tile 1");
    // Piece 3 (bytes 12..16) is on tile 1 at WORK + 0x100 + 12 * 4.
    let at = (WORK + 0x100 + 12 * 4 - BASE) as usize;
    assert_eq!(&tile1[at..at + 4], &x[12..16]);

    let error = device.write_binding(0, &x[..3]).expect_err("short input");
    expect!["binding 0 (`x`) takes 64 bytes but 3 were given"].assert_eq(&error.to_string());
    let error = device
        .run_call(Call::Run, &CopyPlusOne, &mut HostBuffers::default())
        .expect_err("missing input");
    expect!["no host data was given for binding 0 (`x`)"].assert_eq(&error.to_string());
}

#[test]
fn host_streams_walk_strided_runs_block_by_block() {
    // `x` (64 bytes) as the columns of a 4 x 4 matrix of 4-byte elements,
    // stored transposed: column `c` is one run of four blocks, 16 bytes
    // apart in the tensor and packed on the tile. Columns 0 and 1 are on
    // tile 0, columns 2 and 3 on tile 1.
    let package = runnable(|p| {
        p.bindings[0].pieces = (0..4u32)
            .map(|c| Piece {
                count: 4,
                logical_stride: 16,
                address_stride: 4,
                ..Piece::contiguous(u64::from(c) * 4, 4, c / 2, WORK + 0x100 + (c % 2) * 16)
            })
            .collect();
    });
    let mut device = ModelDevice::load(package).expect("load");
    let x = bytes(5, 64);
    device.write_binding(0, &x).expect("write");
    assert_eq!(device.read_binding(0).expect("read"), x);
    // Column 3 on tile 1: elements 3, 7, 11 and 15, in order.
    let tile1 = device.memory(1).expect("tile 1");
    let at = (WORK + 0x110 - BASE) as usize;
    let column: Vec<u8> = [3, 7, 11, 15]
        .iter()
        .flat_map(|&e| x[e * 4..e * 4 + 4].to_vec())
        .collect();
    assert_eq!(&tile1[at..at + 16], column.as_slice());
}

fn check_fault(tweak: impl FnOnce(&mut Package), expect: Expect) {
    let mut device = ModelDevice::load(runnable(tweak)).expect("load");
    let before: Vec<Vec<u8>> = [0, 1, 2, 5]
        .iter()
        .map(|&t| device.memory(t).expect("tile").to_vec())
        .collect();
    // Only the exchange and the later compute can fault here; run the
    // phase directly after loading so nothing else changed memory.
    let program = device.package().exchanges[0].clone();
    let direct = exchange::execute(&mut device.memories, &program);
    if direct.is_err() {
        for (i, &tile) in [0, 1, 2, 5].iter().enumerate() {
            assert_eq!(
                device.memory(tile).expect("tile"),
                before[i],
                "a faulting phase wrote tile {tile}"
            );
        }
    }
    let mut host = inputs();
    let error = device
        .run_call(Call::Run, &CopyPlusOne, &mut host)
        .expect_err("fault");
    expect.assert_eq(&error.to_string());
}

#[test]
fn bad_exchange_addresses_are_faults_naming_tile_and_step() {
    check_fault(
        |p| std::sync::Arc::make_mut(&mut p.exchanges)[0].transfers[0].destinations[1].1 = 0xE8000 - 16,
        expect!["device fault: tile 5: exchange to a bad address (32 bytes at 0xe7ff0) in step `exchange 0 (op y)`"],
    );
    check_fault(
        |p| std::sync::Arc::make_mut(&mut p.exchanges)[0].transfers[1].source_address = 0x4B000,
        expect!["device fault: tile 1: exchange from a bad address (32 bytes at 0x4b000) in step `exchange 0 (op y)`"],
    );
    check_fault(
        |p| std::sync::Arc::make_mut(&mut p.exchanges)[0].transfers[1].destinations[0].1 = WORK + 0x90,
        expect!["device fault: tile 2: two exchange transfers write the same bytes (at 0x90090) in step `exchange 0 (op y)`"],
    );
}

#[test]
fn compute_faults_report_the_lowest_tile() {
    check_fault(
        |p| {
            for tile in [2, 3] {
                p.tiles[tile].segments[0].data[16..28].copy_from_slice(&program_words(0xF0000, WORK, 32));
            }
        },
        expect!["device fault: tile 2, supervisor, pc 0x4c010: out-of-range access (32 bytes at 0xf0000) in step `compute y`"],
    );
}

fn ring(paired: bool, transfers: Vec<Transfer>) -> ExchangeProgram {
    ExchangeProgram {
        label: "test".into(),
        transfers,
        paired,
        horizon_cycles: 0,
    }
}

fn transfer(source_tile: u32, bytes: u32, destinations: &[u32]) -> Transfer {
    Transfer {
        source_tile,
        source_address: WORK,
        bytes,
        destinations: destinations.iter().map(|&t| (t, WORK)).collect(),
    }
}

#[test]
fn exchange_costs_match_the_compilers_schedule() {
    // The same phases as `schedule`'s tests, with the same figures.
    let balanced: Vec<Transfer> = (0..4).map(|t| transfer(t, 1024, &[(t + 1) % 4])).collect();
    assert_eq!(
        exchange_cost(&IPU21, &ring(false, balanced.clone())).horizon,
        257
    );
    assert_eq!(exchange_cost(&IPU21, &ring(true, balanced)).horizon, 258);
    let lopsided = vec![transfer(0, 4096, &[5])];
    assert_eq!(
        exchange_cost(&IPU21, &ring(false, lopsided.clone())).horizon,
        1025
    );
    assert_eq!(exchange_cost(&IPU21, &ring(true, lopsided)).horizon, 513);
    let broadcast = vec![transfer(0, 400, &[1, 2, 3]), transfer(1, 800, &[1])];
    let cost = exchange_cost(&IPU21, &ring(false, broadcast));
    assert_eq!(cost.horizon, 200);
    assert_eq!(cost.tiles, vec![(0, 101), (1, 200), (2, 100), (3, 100)]);
    // A broadcast is sent once and received by each destination; a copy
    // within a tile is neither.
    assert_eq!(cost.bytes, vec![(0, 400), (400, 0), (400, 0), (400, 0)]);
}

const STRESS_TILES: u32 = 12;
const WINDOW: u32 = 4096;

/// A package of `STRESS_TILES` tiles with random data and random exchange
/// phases: broadcasts, local copies, sources that other transfers of the
/// same phase overwrite, ordinary and paired, run in a chain and in a
/// repeat.
fn stress_package(seed: u64) -> Package {
    let mut rng = Rng(seed);
    let mut package = sample();
    package.tiles = (0..STRESS_TILES)
        .map(|tile| TileImage {
            tile,
            segments: vec![Segment {
                address: WEIGHTS,
                memory_size: WINDOW,
                kind: SegmentKind::Data,
                data: bytes(seed ^ (u64::from(tile) << 32), WINDOW as usize),
            }],
        })
        .collect();
    package.profile = crate::package::ProfileLayout::default();
    package.initialize = HostCall::default();
    package.exchanges = (0..6)
        .map(|phase| {
            let mut written: Vec<(u32, u32, u32)> = Vec::new();
            let mut transfers = Vec::new();
            for _ in 0..60 {
                let bytes = 1 + rng.below(300) as u32;
                let source_tile = rng.below(u64::from(STRESS_TILES)) as u32;
                let source_address = WEIGHTS + rng.below(u64::from(WINDOW - bytes + 1)) as u32;
                let mut destinations = Vec::new();
                for _ in 0..1 + rng.below(4) {
                    let tile = rng.below(u64::from(STRESS_TILES)) as u32;
                    let address = WEIGHTS + rng.below(u64::from(WINDOW - bytes + 1)) as u32;
                    let clashes = |&(t, a, n): &(u32, u32, u32)| {
                        t == tile && a < address + bytes && address < a + n
                    };
                    if !written.iter().any(clashes) {
                        written.push((tile, address, bytes));
                        destinations.push((tile, address));
                    }
                }
                if !destinations.is_empty() {
                    transfers.push(Transfer {
                        source_tile,
                        source_address,
                        bytes,
                        destinations,
                    });
                }
            }
            ExchangeProgram {
                label: format!("phase {phase}"),
                transfers,
                paired: phase % 2 == 1,
                horizon_cycles: 0,
            }
        })
        .collect::<Vec<_>>()
        .into();
    let mut steps: Vec<Step> = (0..6).map(|program| Step::Exchange { program }).collect();
    steps.push(Step::Repeat {
        count: 3,
        body: vec![Step::Exchange { program: 2 }, Step::Exchange { program: 5 }],
    });
    // The check's output is read back, as in every package (reading
    // changes no memory).
    steps.push(Step::HostRead { binding: 2 });
    package.run = HostCall { steps };
    package
}

/// The simplest model of exchange: per phase, copy from a snapshot.
fn expected_memories(package: &Package) -> Vec<Vec<u8>> {
    let mut memories: Vec<Vec<u8>> = package
        .tiles
        .iter()
        .map(|t| t.segments[0].data.clone())
        .collect();
    let mut order: Vec<u32> = (0..6).collect();
    order.extend([2, 5, 2, 5, 2, 5]);
    for program in order {
        let before = memories.clone();
        for t in &package.exchanges[program as usize].transfers {
            let from = (t.source_address - WEIGHTS) as usize;
            let data = &before[t.source_tile as usize][from..from + t.bytes as usize];
            for &(tile, address) in &t.destinations {
                let to = (address - WEIGHTS) as usize;
                memories[tile as usize][to..to + t.bytes as usize].copy_from_slice(data);
            }
        }
    }
    memories
}

fn run_in_pool(threads: usize, package: &Arc<Package>) -> (CallRecord, Vec<Vec<u8>>, HostBuffers) {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("pool");
    pool.install(|| {
        let mut device = ModelDevice::load(Arc::clone(package)).expect("load");
        let mut host = inputs();
        if !package.initialize.steps.is_empty() {
            device
                .run_call(Call::Initialize, &CopyPlusOne, &mut host)
                .expect("initialize");
        }
        let record = device
            .run_call(Call::Run, &CopyPlusOne, &mut host)
            .expect("run");
        let memories = package
            .tiles
            .iter()
            .map(|t| device.memory(t.tile).expect("tile").to_vec())
            .collect();
        (record, memories, host)
    })
}

#[test]
fn random_exchange_phases_deliver_every_byte() {
    for seed in [3, 17, 2024] {
        let package = Arc::new(stress_package(seed));
        let transfers: usize = package.exchanges.iter().map(|p| p.transfers.len()).sum();
        assert!(
            transfers > 250,
            "the generator made only {transfers} transfers"
        );
        let (record, memories, _) = run_in_pool(2, &package);
        let expected = expected_memories(&package);
        let window = (WEIGHTS - BASE) as usize..(WEIGHTS - BASE + WINDOW) as usize;
        for (tile, memory) in memories.iter().enumerate() {
            assert_eq!(
                &memory[window.clone()],
                expected[tile].as_slice(),
                "seed {seed}, tile {tile}"
            );
            assert!(memory[..window.start]
                .iter()
                .chain(&memory[window.end..])
                .all(|&b| b == 0));
        }
        let exchanges: Vec<&StepProfile> = record
            .steps
            .iter()
            .filter(|s| s.kind == crate::profile::StepKind::Exchange)
            .collect();
        assert_eq!(exchanges.len(), 12);
        assert_eq!(
            exchanges[1].cycles,
            exchange_cost(&IPU21, &package.exchanges[1]).horizon
        );
        assert_eq!(
            record.cycles,
            record.steps.iter().map(|s| s.cycles).sum::<u64>()
        );
    }
}

#[test]
fn results_do_not_depend_on_thread_count() {
    for package in [runnable(|_| {}), Arc::new(stress_package(5))] {
        let one = run_in_pool(1, &package);
        let two = run_in_pool(2, &package);
        assert_eq!(one, two);
    }
}

/// The default watchdog is a hundred times the estimate within its bounds,
/// and never below twice the estimate: a long repeat that estimates
/// itself past the cap still runs to its end.
#[test]
fn the_default_watchdog_never_stops_a_program_within_its_estimate() {
    assert_eq!(default_watchdog(0), MIN_WATCHDOG_CYCLES);
    assert_eq!(default_watchdog(1_000_000), 100_000_000);
    assert_eq!(default_watchdog(100_000_000), DEFAULT_WATCHDOG_CYCLES);
    assert_eq!(default_watchdog(2_067_367_580), 4_134_735_160);
    assert_eq!(default_watchdog(u64::MAX), u64::MAX);
}
