//! Package round trips, validation and corruption tests, and the sample
//! package other modules' tests load.

use super::file::{assemble, encode, HEADER_BYTES, TABLE_ENTRY_BYTES};
use super::*;
use crate::graph::{Check, Init, Op, OpKind, ReferencePrecision, Role, Tensor};
use expect_test::{expect, Expect};

fn tensor(name: &str, shape: &[usize], role: Role) -> Tensor {
    Tensor {
        name: name.into(),
        shape: shape.to_vec(),
        dtype: DType::F16,
        scale: 0,
        role,
        init: (role != Role::Activation).then_some(Init::Uniform { scale: 1.0 }),
        repeat: None,
        written_name: None,
    }
}

pub(crate) fn sample_graph() -> Graph {
    Graph {
        name: "sample".into(),
        target: crate::target::TargetId::Ipu21,
        tiles: 8,
        seed: 7,
        tensors: vec![
            tensor("x", &[4, 8], Role::Input),
            tensor("w", &[8, 8], Role::Weight),
            tensor("y", &[4, 8], Role::Activation),
        ],
        ops: vec![Op {
            name: "y".into(),
            kind: OpKind::Matmul {
                transpose_rhs: false,
                epilogue: Vec::new(),
            },
            inputs: vec![TensorId(0), TensorId(1)],
            output: TensorId(2),
        }],
        repeats: vec![],
        outputs: vec![TensorId(2)],
        check: Check {
            reference_precision: ReferencePrecision::Device,
            min_cosine_similarity: 0.99,
            max_abs_error: 0.25,
            outputs: vec![TensorId(2)],
        },
    }
}

const CODE: u32 = 0x4C000;
const WEIGHTS: u32 = 0x80000;
const WORK: u32 = 0x90000;

/// Four tiles (0, 1, 2, 5): `x` is split over tiles 0 and 1, `w` is
/// replicated on both, one exchange program broadcasts `x`'s halves to tiles
/// 2 and 5, whose results `y` is read back from.
pub(crate) fn sample() -> Package {
    let image = |tile: u32| TileImage {
        tile,
        segments: vec![
            Segment {
                address: CODE,
                memory_size: 64,
                kind: SegmentKind::Code,
                data: (0..64).map(|i| (i as u8) ^ (tile as u8)).collect(),
            },
            Segment {
                address: WEIGHTS,
                memory_size: 256,
                kind: SegmentKind::Data,
                data: vec![0xAB; 128],
            },
            Segment {
                address: WORK,
                memory_size: 512,
                kind: SegmentKind::Zero,
                data: vec![],
            },
        ],
    };
    let piece = Piece::contiguous;
    let compute = |label: &str, tiles: &[u32]| Step::Compute {
        label: label.into(),
        op: Some("y".into()),
        tiles: tiles.iter().map(|&t| (t, CODE + 16)).collect(),
    };
    Package {
        header: Header {
            // Fixed rather than the crate version, so snapshots survive releases.
            compiler_version: "0.1.0".into(),
            ..Header::current("ipu21")
        },
        tiles: [0, 1, 2, 5].into_iter().map(image).collect(),
        exchanges: std::sync::Arc::new(vec![ExchangeProgram {
            label: "op y".into(),
            transfers: vec![
                Transfer {
                    source_tile: 0,
                    source_address: WORK,
                    bytes: 32,
                    destinations: vec![(2, WORK + 0x80), (5, WORK + 0x80)],
                },
                Transfer {
                    source_tile: 1,
                    source_address: WORK,
                    bytes: 32,
                    destinations: vec![(2, WORK + 0xA0)],
                },
            ],
            paired: false,
            horizon_cycles: 17,
        }]),
        initialize: HostCall {
            steps: vec![Step::HostWrite { binding: 1 }],
        },
        run: HostCall {
            steps: vec![
                Step::HostWrite { binding: 0 },
                compute("y", &[0, 1]),
                Step::Repeat {
                    count: 3,
                    body: vec![Step::Exchange { program: 0 }, compute("y", &[2, 5])],
                },
                Step::HostRead { binding: 2 },
            ],
        },
        bindings: vec![
            Binding {
                tensor: TensorId(0),
                iteration: None,
                dtype: DType::F16,
                element_count: 32,
                pieces: vec![piece(0, 32, 0, WORK), piece(32, 32, 1, WORK)],
            },
            Binding {
                tensor: TensorId(1),
                iteration: None,
                dtype: DType::F16,
                element_count: 64,
                pieces: vec![piece(0, 128, 0, WEIGHTS), piece(0, 128, 1, WEIGHTS)],
            },
            Binding {
                tensor: TensorId(2),
                iteration: None,
                dtype: DType::F16,
                element_count: 32,
                pieces: vec![piece(0, 32, 2, WORK + 0x40), piece(32, 32, 5, WORK + 0x40)],
            },
        ],
        profile: ProfileLayout {
            estimated_cycles: 4000,
            kernels: vec!["gemm_f16_k8".into(), "add_f16".into()],
            steps: vec![
                StepKernels {
                    call: Call::Run,
                    step: 1,
                    tiles: vec![(0, 0), (1, 0)],
                },
                StepKernels {
                    call: Call::Run,
                    step: 4,
                    tiles: vec![(2, 1), (5, 1)],
                },
            ],
            ops: vec![OpEstimate {
                name: "y".into(),
                kind: "matmul".into(),
                executions: 4,
                tiles: 2,
                compute_cycles: 700,
                exchange_cycles: 17,
                sync_cycles: 600,
                macs: 4096,
                roofline_cycles: 1,
                k_slice: Some(64),
                gelu_in_f16: true,
            }],
            estimates: vec![StepEstimates {
                call: Call::Run,
                step: 1,
                tiles: vec![(0, 650), (1, 650)],
            }],
            exchange_ops: vec![ExchangeOp {
                call: Call::Run,
                step: 3,
                op: "y".into(),
            }],
            memory: vec![TileMemory {
                tile: 2,
                support: vec![SupportPlace {
                    kind: "code".into(),
                    address: CODE,
                    bytes: 64,
                }],
                buffers: vec![BufferPlace {
                    address: WORK,
                    bytes: 512,
                    kind: BufferKind::Activation,
                    name: "activation `y`".into(),
                    op: Some("y".into()),
                    first_step: 3,
                    last_step: 5,
                }],
            }],
        },
        graph: sample_graph(),
        file_values: Vec::new(),
    }
}

#[test]
fn packages_round_trip_through_files() {
    let package = sample();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = camino::Utf8PathBuf::from_path_buf(dir.path().join("sample.ipuexe")).expect("utf-8");
    write(&path, &package).expect("write");
    assert_eq!(read(&path).expect("read"), package);
    // Encoding is deterministic, so identical packages give identical files.
    assert_eq!(
        encode(&package).expect("encode"),
        std::fs::read(&path).expect("bytes")
    );
}

#[test]
fn phase_counts_are_derived_from_the_steps() {
    let package = sample();
    assert_eq!(package.run.phase_count(), 1);
    assert_eq!(package.run.executed_phase_count(), 3);
    assert_eq!(package.run.preorder().len(), 6);
    assert_eq!(package.profile.kernel(Call::Run, 4, 5), Some("add_f16"));
    assert_eq!(package.profile.kernel(Call::Run, 4, 0), None);
}

#[test]
fn every_truncation_is_an_error() {
    let bytes = encode(&sample()).expect("encode");
    for length in 0..bytes.len() {
        assert!(
            parse(&bytes[..length]).is_err(),
            "truncating to {length} bytes was accepted"
        );
    }
    let mut longer = bytes.clone();
    longer.push(0);
    check_error(
        parse(&longer),
        expect!["the package's part table is malformed: the parts end at byte 4176 but the file has 4177 bytes"],
    );
}

#[test]
fn every_bit_flip_is_an_error() {
    let bytes = encode(&sample()).expect("encode");
    for offset in 0..bytes.len() {
        for bit in [offset % 8, (offset + 3) % 8] {
            let mut flipped = bytes.clone();
            flipped[offset] ^= 1 << bit;
            assert!(
                parse(&flipped).is_err(),
                "flipping bit {bit} of byte {offset} was accepted"
            );
        }
    }
}

fn check_error<T: std::fmt::Debug>(result: Result<T, PackageError>, expect: Expect) {
    match result {
        Ok(value) => panic!("expected an error, got {value:?}"),
        Err(error) => expect.assert_eq(&error.to_string()),
    }
}

/// The parts of an encoded file, by the table (the file is trusted here).
fn parts_of(bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
    let count = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes")) as usize;
    (0..count)
        .map(|i| {
            let entry = &bytes[HEADER_BYTES + i * TABLE_ENTRY_BYTES..][..TABLE_ENTRY_BYTES];
            let name = String::from_utf8(entry[..16].iter().copied().filter(|&b| b != 0).collect())
                .expect("name");
            let offset = u64::from_le_bytes(entry[16..24].try_into().expect("8 bytes")) as usize;
            let length = u64::from_le_bytes(entry[24..32].try_into().expect("8 bytes")) as usize;
            (name, bytes[offset..offset + length].to_vec())
        })
        .collect()
}

/// Re-assembles `bytes` with valid checksums after `edit` changed its parts.
fn reassemble(
    bytes: &[u8],
    version: u32,
    edit: impl FnOnce(&mut Vec<(String, Vec<u8>)>),
) -> Vec<u8> {
    let mut parts = parts_of(bytes);
    edit(&mut parts);
    let named: Vec<(&str, &[u8])> = parts
        .iter()
        .map(|(n, p)| (n.as_str(), p.as_slice()))
        .collect();
    assemble(version, &named)
}

fn replace_json(
    parts: &mut [(String, Vec<u8>)],
    name: &str,
    edit: impl FnOnce(&mut serde_json::Value),
) {
    let part = parts.iter_mut().find(|(n, _)| n == name).expect("part");
    let mut value: serde_json::Value = serde_json::from_slice(&part.1).expect("json");
    edit(&mut value);
    part.1 = serde_json::to_vec(&value).expect("json");
}

#[test]
fn container_errors_name_what_is_wrong() {
    let bytes = encode(&sample()).expect("encode");
    check_error(
        parse(b""),
        expect!["not an ipub package: the file does not start with the .ipuexe magic bytes"],
    );
    check_error(
        parse(b"PK\x03\x04 a zip file"),
        expect!["not an ipub package: the file does not start with the .ipuexe magic bytes"],
    );
    check_error(parse(&bytes[..30]), expect!["not an ipub package: the file is 30 bytes, shorter than the 48-byte header and part table"]);

    let mut newer = bytes.clone();
    newer[8..12].copy_from_slice(&7u32.to_le_bytes());
    check_error(
        parse(&newer),
        expect!["package format version 7 is newer than this ipub supports (4)"],
    );
    let mut older = bytes.clone();
    older[8..12].copy_from_slice(&0u32.to_le_bytes());
    check_error(
        parse(&older),
        expect!["package format version 0 is not supported (this ipub reads version 4)"],
    );

    let mut table = bytes.clone();
    table[HEADER_BYTES + 20] ^= 0x10;
    check_error(
        parse(&table),
        expect!["the package's part table is corrupt (its checksum does not match)"],
    );

    let mut payload = bytes.clone();
    let last = payload.len() - 3;
    payload[last] ^= 1;
    check_error(
        parse(&payload),
        expect!["checksum of part `profile` does not match: the package is corrupt"],
    );

    let short = reassemble(&bytes, super::FORMAT_VERSION, |parts| {
        parts.retain(|(n, _)| n != "bindings")
    });
    check_error(parse(&short), expect!["the package has no `bindings` part"]);
    let unknown = reassemble(&bytes, super::FORMAT_VERSION, |parts| {
        parts.push(("extra".into(), vec![1, 2]))
    });
    check_error(
        parse(&unknown),
        expect!["the package's part table is malformed: unknown part `extra` for format version 4"],
    );
    let twice = reassemble(&bytes, super::FORMAT_VERSION, |parts| {
        let copy = parts[0].clone();
        parts.push(copy)
    });
    check_error(
        parse(&twice),
        expect!["the package's part table is malformed: part `meta` appears twice"],
    );
    let garbled = reassemble(&bytes, super::FORMAT_VERSION, |parts| {
        parts[5].1 = b"{\"initialize\":".to_vec()
    });
    check_error(
        parse(&garbled),
        expect!["part `calls` cannot be decoded: EOF while parsing a value at line 1 column 14"],
    );
}

#[test]
fn the_target_must_be_ipu21() {
    let bytes = encode(&sample()).expect("encode");
    let other = reassemble(&bytes, super::FORMAT_VERSION, |parts| {
        replace_json(parts, "meta", |meta| meta["target"] = "ipu9".into())
    });
    check_error(
        parse(&other),
        expect!["package targets `ipu9`; this ipub supports only ipu21"],
    );
}

/// Checks that `edit`ed sample packages are rejected both when written and
/// when a file holding them (with valid checksums) is read.
fn check_invalid(edit: impl Fn(&mut Package), expect: Expect) {
    let mut package = sample();
    edit(&mut package);
    let message = encode(&package)
        .expect_err("invalid package encoded")
        .to_string();
    expect.assert_eq(&message);
    package.validate().expect_err("validate");
}

#[test]
fn segments_must_fit_the_memory_map() {
    check_invalid(
        |p| p.tiles[0].segments[2].address = 0xE7B00,
        expect!["invalid package (tiles): tile 0 zero segment at 0xe7b00: 0xe7b00..0xe7d00 is outside loadable memory 0x4c000..0xe7bb0"],
    );
    check_invalid(
        |p| p.tiles[0].segments[0].address = 0x40000,
        expect!["invalid package (tiles): tile 0 code segment at 0x40000: 0x40000..0x40040 is outside loadable memory 0x4c000..0xe7bb0"],
    );
    check_invalid(
        |p| p.tiles[1].segments[0].address = 0x7FFE0,
        expect!["invalid package (tiles): tile 1 code segment at 0x7ffe0: code must lie in region 0 (below 0x80000) but ends at 0x80020"],
    );
    check_invalid(
        |p| p.tiles[1].segments[1].memory_size = 100,
        expect!["invalid package (tiles): tile 1 data segment at 0x80000: 128 bytes of data exceed its memory size of 100"],
    );
    check_invalid(
        |p| p.tiles[1].segments[1].address = 0x4C020,
        expect!["invalid package (tiles): tile 1 data segment at 0x4c020: overlaps the previous segment or is out of order"],
    );
    check_invalid(
        |p| p.tiles[2].segments[2].data = vec![1],
        expect![
            "invalid package (tiles): tile 2 zero segment at 0x90000: a zero segment carries data"
        ],
    );
    check_invalid(
        |p| p.tiles[3].tile = 1472,
        expect!["invalid package (tiles): tile 1472 does not exist (ipu21 has 1472 tiles)"],
    );
    check_invalid(
        |p| p.tiles.swap(0, 1),
        expect!["invalid package (tiles): tile 0 is listed out of order or twice"],
    );
}

#[test]
fn exchanges_a_reader_would_refuse_are_not_written() {
    // The sample's exchange programs have 2 transfers to 3 destinations.
    let package = sample();
    let size = |limits| super::validate::exchange_size(&package, limits);
    assert!(size((2, 3)).is_ok());
    check_error(
        size((1, 3)),
        expect!["invalid package (exchange): the exchange programs have 2 transfers, more than the 1 a package may hold"],
    );
    check_error(
        size((2, 2)),
        expect!["invalid package (exchange): the exchange programs have 3 transfer destinations, more than the 2 a package may hold"],
    );
}

#[test]
fn references_must_resolve() {
    check_invalid(
        |p| p.run.steps[0] = Step::HostWrite { binding: 9 },
        expect!["invalid package (calls): call `run`: binding 9 does not exist (3 bindings)"],
    );
    check_invalid(
        |p| p.initialize.steps.push(Step::Exchange { program: 1 }),
        expect!["invalid package (calls): call `initialize`: exchange program 1 does not exist (1 programs)"],
    );
    check_invalid(
        |p| p.run.steps[1] = Step::Compute { label: "y".into(), op: None, tiles: vec![(3, CODE)] },
        expect!["invalid package (calls): call `run`: compute `y` runs on tile 3, which is not one of the package's tiles"],
    );
    check_invalid(
        |p| p.run.steps[1] = Step::Compute { label: "y".into(), op: None, tiles: vec![(0, WEIGHTS)] },
        expect!["invalid package (calls): call `run`: compute `y` enters tile 0 at 0x80000, which is not an aligned address in its code"],
    );
    check_invalid(
        |p| {
            p.run.steps[2] = Step::Repeat {
                count: 0,
                body: vec![],
            }
        },
        expect!["invalid package (calls): call `run`: a repeat runs zero times"],
    );
    check_invalid(
        |p| std::sync::Arc::make_mut(&mut p.exchanges)[0].transfers[1].destinations[0].0 = 4,
        expect!["invalid package (exchange): exchange program 0 (op y), transfer 1: tile 4 is not one of the package's tiles"],
    );
    check_invalid(
        |p| p.profile.steps[0].step = 2,
        expect!["invalid package (profile): call `run` step 2: is not a compute step"],
    );
    check_invalid(
        |p| p.profile.steps[1].tiles[0].1 = 2,
        expect!["invalid package (profile): call `run` step 4: kernel 2 is not in the kernel list"],
    );
    check_invalid(
        |p| p.profile.estimates[0].step = 3,
        expect!["invalid package (profile): estimates of call `run` step 3: not a compute step"],
    );
    check_invalid(
        |p| p.profile.estimates[0].tiles[0].0 = 2,
        expect!["invalid package (profile): estimates of call `run` step 1: tile 2 does not take part in the step"],
    );
    check_invalid(
        |p| p.profile.exchange_ops[0].step = 4,
        expect![
            "invalid package (profile): operation `y` of call `run` step 4: not an exchange step"
        ],
    );
    check_invalid(
        |p| p.profile.memory[0].tile = 3,
        expect!["invalid package (profile): placement of tile 3: not a package tile, out of order or listed twice"],
    );
    check_invalid(
        |p| p.profile.memory[0].buffers[0].last_step = 6,
        expect!["invalid package (profile): placement of tile 2: activation `y` lives in steps 3..=6 of a 6-step run"],
    );
}

/// Makes binding 0 (the input `x`) one the host also reads back.
fn read_back_x(p: &mut Package) {
    p.run.steps.push(Step::HostRead { binding: 0 });
}

#[test]
fn bindings_read_back_must_cover_their_tensor_inside_tile_memory() {
    check_invalid(
        |p| {
            read_back_x(p);
            p.bindings[0].pieces.pop();
        },
        expect!["invalid package (bindings): binding 0: no piece holds byte 32 of tensor `x` (64 bytes)"],
    );
    check_invalid(
        |p| p.bindings[0].pieces[1].logical_offset = 40,
        expect!["invalid package (bindings): binding 0: piece 1 covers bytes from 40 beyond the tensor's 64"],
    );
    check_invalid(
        |p| p.bindings[2].pieces[0].address = 0xE7BA0,
        expect!["invalid package (bindings): binding 2: piece 0 at 0xe7ba0 (1 x 32 bytes) on tile 2 is outside loadable memory"],
    );
    check_invalid(
        |p| p.bindings[2].pieces[0].tile = 3,
        expect!["invalid package (bindings): binding 2: piece 0 is on tile 3, which is not one of the package's tiles"],
    );
    check_invalid(
        |p| p.bindings[1].dtype = DType::F32,
        expect!["invalid package (bindings): binding 1: is f32 x 64 but tensor `w` is f16 x 64"],
    );
}

/// An input the device reads only part of (through a slice) is written
/// only there: its binding need not cover the tensor.
#[test]
fn an_input_binding_may_leave_bytes_the_device_never_reads() {
    let mut package = sample();
    package.bindings[0].pieces.pop();
    let decoded = parse(&encode(&package).expect("valid")).expect("parses");
    assert_eq!(decoded.bindings[0], package.bindings[0]);
}

/// `x` (64 bytes) as two interleaved strided runs on tile 0: the 8-byte
/// blocks at even multiples of 8 in one, the odd ones in the other.
fn interleaved(p: &mut Package) {
    let run = |logical_offset, address| Piece {
        count: 4,
        logical_stride: 16,
        address_stride: 8,
        ..Piece::contiguous(logical_offset, 8, 0, address)
    };
    p.bindings[0].pieces = vec![run(0, WORK), run(8, WORK + 0x20)];
}

#[test]
fn strided_runs_are_checked_block_by_block_without_expanding_them() {
    let mut package = sample();
    interleaved(&mut package);
    let decoded = parse(&encode(&package).expect("valid")).expect("parses");
    assert_eq!(decoded.bindings[0], package.bindings[0]);
    check_invalid(
        |p| {
            read_back_x(p);
            interleaved(p);
            p.bindings[0].pieces[1].count = 3;
        },
        expect!["invalid package (bindings): binding 0: no piece holds byte 56 of tensor `x` (64 bytes)"],
    );
    check_invalid(
        |p| {
            interleaved(p);
            p.bindings[0].pieces[1].logical_stride = 17;
        },
        expect!["invalid package (bindings): binding 0: piece 1 covers bytes from 8 beyond the tensor's 64"],
    );
    check_invalid(
        |p| {
            interleaved(p);
            p.bindings[0].pieces[0].address_stride = 4;
        },
        expect!["invalid package (bindings): binding 0: piece 0 has blocks of 8 bytes every 4 bytes: they overlap in tile memory"],
    );
    // Hostile counts and strides are refused by arithmetic, not by walking
    // or allocating their blocks.
    check_invalid(
        |p| {
            interleaved(p);
            p.bindings[0].pieces[0].count = u32::MAX;
            p.bindings[0].pieces[0].address_stride = u32::MAX;
        },
        expect!["invalid package (bindings): the bindings have 4294967303 blocks (at most 67108864 are allowed)"],
    );
    check_invalid(
        |p| {
            interleaved(p);
            p.bindings[0].pieces[0].logical_stride = u64::MAX;
        },
        expect!["invalid package (bindings): binding 0: piece 0 covers bytes from 0 beyond the tensor's 64"],
    );
    check_invalid(
        |p| {
            interleaved(p);
            p.bindings[0].pieces[0].count = 2;
            p.bindings[0].pieces[0].address_stride = u32::MAX;
        },
        expect!["invalid package (bindings): binding 0: piece 0 at 0x90000 (2 x 8 bytes) on tile 0 is outside loadable memory"],
    );
    check_invalid(
        |p| {
            interleaved(p);
            p.bindings[0].pieces[0].count = 0;
        },
        expect!["invalid package (bindings): binding 0: piece 0 is empty"],
    );
}

#[test]
fn coverage_sweeps_runs_in_any_order_and_finds_the_first_hole() {
    use super::validate::first_uncovered;
    let strided = |logical_offset, bytes, count, logical_stride| Piece {
        count,
        logical_stride,
        address_stride: bytes,
        ..Piece::contiguous(logical_offset, bytes, 0, 0)
    };
    // Columns of a transposed 4 x 4 matrix of 2-byte elements.
    let columns: Vec<Piece> = (0..4).rev().map(|c| strided(c * 2, 2, 4, 8)).collect();
    assert_eq!(first_uncovered(&columns, 32), None);
    assert_eq!(first_uncovered(&columns[..3], 32), Some(0));
    assert_eq!(first_uncovered(&columns[1..], 32), Some(6));
    // Blocks that touch are one interval; a repeated block (a broadcast)
    // covers its bytes only.
    assert_eq!(first_uncovered(&[strided(0, 4, 8, 4)], 32), None);
    assert_eq!(first_uncovered(&[strided(0, 4, 8, 0)], 32), Some(4));
    // Overlapping copies (a replicated tensor) and a run past the end of
    // the others.
    let replicated = [
        strided(0, 8, 2, 16),
        strided(0, 32, 1, 0),
        strided(8, 8, 2, 16),
    ];
    assert_eq!(first_uncovered(&replicated, 32), None);
    assert_eq!(first_uncovered(&[], 0), None);
    assert_eq!(first_uncovered(&[], 1), Some(0));
}

#[test]
fn inspect_shows_tiles_kernels_steps_exchanges_and_bindings() {
    expect![[r#"
        package sample for ipu21: format 4, written by ipub 0.1.0
        tiles: 4 used of 1472
          tile    0: code      64  data     256  zero     512  free  637040 of 637872 bytes
          tile    1: code      64  data     256  zero     512  free  637040 of 637872 bytes
          tile    2: code      64  data     256  zero     512  free  637040 of 637872 bytes
          tile    5: code      64  data     256  zero     512  free  637040 of 637872 bytes
          all tiles: code 256  data 1024  zero 2048 bytes
        kernels: 2 (estimated run: 4000 cycles)
          gemm_f16_k8: 2 tiles, 1 compute steps
          add_f16: 2 tiles, 1 compute steps
        call initialize: 1 steps, 0 exchange phases (0 executed)
          host write w (binding 1)
        call run: 6 steps, 1 exchange phases (3 executed)
          host write x (binding 0)
          compute y (op y) on 2 tiles
          repeat x3
            sync; exchange 0 (op y)
            compute y (op y) on 2 tiles
          host read y (binding 2)
        exchange programs: 1
          0 op y: 2 transfers (1 broadcasts) from 2 tiles, 64 bytes sent, 96 delivered, horizon 17 cycles, ordinary
        bindings: 3
          0 x: f16 x 32 (64 bytes) in 2 runs of 2 blocks on 2 tiles
          1 w: f16 x 64 (128 bytes) in 2 runs of 2 blocks on 2 tiles
          2 y: f16 x 32 (64 bytes) in 2 runs of 2 blocks on 2 tiles
    "#]].assert_eq(&inspect::render(&sample()));
}

#[test]
fn equal_segment_payloads_are_stored_once() {
    let bytes = encode(&sample()).expect("encode");
    let parts = parts_of(&bytes);
    let segments = &parts.iter().find(|(n, _)| n == "segments").expect("part").1;
    // Four distinct code payloads, and the replicated weights once.
    assert_eq!(segments.len(), 4 * 64 + 128);
    assert_eq!(parse(&bytes).expect("parses"), sample());

    let with_offset = |tile: usize, segment: usize, offset: u64| {
        reassemble(&bytes, super::FORMAT_VERSION, |parts| {
            replace_json(parts, "tiles", |tiles| {
                tiles[tile]["segments"][segment]["offset"] = offset.into();
            })
        })
    };
    // Tile 1's code pointed into earlier payloads: in bounds, but the next
    // new payload (tile 2's code) no longer follows on.
    check_error(
        parse(&with_offset(1, 0, 64)),
        expect!["invalid package (segments): tile 2 segment at 0x4c000 starts at byte 256, neither inside the 192 bytes laid out before it nor right after them"],
    );
    check_error(
        parse(&with_offset(3, 0, 400)),
        expect!["invalid package (segments): tile 5 segment at 0x4c000 needs bytes 400..464 of the part's 384"],
    );
    check_error(
        parse(&with_offset(2, 0, 300)),
        expect!["invalid package (segments): tile 2 segment at 0x4c000 starts at byte 300, neither inside the 256 bytes laid out before it nor right after them"],
    );
}

/// The sample with its weight `w` read from a file, and the values the
/// package carries for it.
fn with_file_weight() -> Package {
    let mut package = sample();
    package.graph.tensors[1].init = Some(Init::File {
        path: "w.safetensors".into(),
        key: Some("w".into()),
    });
    package.file_values = vec![FileValues {
        tensor: TensorId(1),
        iteration: None,
        bytes: std::sync::Arc::new(vec![0x3c; 8 * 8 * 2]),
    }];
    package
}

#[test]
fn values_from_files_travel_in_the_tensors_part() {
    let package = with_file_weight();
    let bytes = encode(&package).expect("encode");
    let names: Vec<String> = parts_of(&bytes).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names.last().map(String::as_str), Some("tensors"));
    assert_eq!(parse(&bytes).expect("parse"), package);
    assert_eq!(
        package.file_bytes(TensorId(1), None).map(<[u8]>::len),
        Some(128)
    );
    // A package without inits from files has no such part.
    let plain = encode(&sample()).expect("encode");
    assert!(parts_of(&plain).iter().all(|(n, _)| n != "tensors"));
}

#[test]
fn values_from_files_must_match_their_tensors() {
    let check = |edit: &dyn Fn(&mut Package), expected: Expect| {
        let mut package = with_file_weight();
        edit(&mut package);
        check_error(encode(&package), expected);
    };
    check(
        &|p| p.file_values.clear(),
        expect!["invalid package (tensors): the values of `w` are missing"],
    );
    check(
        &|p| p.file_values[0].bytes = std::sync::Arc::new(vec![0; 3]),
        expect!["invalid package (tensors): entry `1` has 3 bytes, but its tensor has 128"],
    );
    check(
        &|p| p.file_values[0].tensor = TensorId(0),
        expect!["invalid package (tensors): entry `0` is not a tensor read from a file, or appears twice"],
    );
    // A damaged part with valid checksums.
    let bytes = encode(&with_file_weight()).expect("encode");
    let damaged = reassemble(&bytes, super::FORMAT_VERSION, |parts| {
        let part = parts
            .iter_mut()
            .find(|(n, _)| n == "tensors")
            .expect("part");
        part.1.truncate(part.1.len() - 1);
    });
    check_error(parse(&damaged), expect!["invalid package (tensors): the part is not a valid safetensors file: incomplete metadata, file not fully covered"]);
}
