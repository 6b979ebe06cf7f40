//! Lowering tests on small hand-built graphs: each lowers with the
//! planner's selected partitions, runs the verifier and compares the
//! program dump with a snapshot.

use super::verify::verify;
use super::*;
use crate::graph::*;
use crate::pipeline::refine::operator_plans;
use crate::plan::signature::OpSignature;
use expect_test::{expect, Expect};

pub(crate) struct Builder {
    pub(crate) graph: Graph,
}

impl Builder {
    pub(crate) fn new(tiles: u32) -> Builder {
        Builder {
            graph: Graph {
                name: "test".into(),
                target: crate::target::TargetId::Ipu21,
                tiles,
                seed: 1,
                tensors: Vec::new(),
                ops: Vec::new(),
                repeats: Vec::new(),
                outputs: Vec::new(),
                check: Check {
                    reference_precision: ReferencePrecision::Device,
                    min_cosine_similarity: 0.99,
                    max_abs_error: 1.0,
                    outputs: Vec::new(),
                },
            },
        }
    }

    pub(crate) fn tensor(
        &mut self,
        name: &str,
        shape: &[usize],
        dtype: DType,
        role: Role,
    ) -> TensorId {
        self.graph.tensors.push(Tensor {
            name: name.into(),
            shape: shape.to_vec(),
            dtype,
            scale: if dtype.is_fp8() { -2 } else { 0 },
            role,
            init: (role != Role::Activation).then_some(Init::Normal { std: 1.0 }),
            repeat: None,
            written_name: None,
        });
        TensorId(self.graph.tensors.len() as u32 - 1)
    }

    pub(crate) fn op(
        &mut self,
        kind: OpKind,
        inputs: &[TensorId],
        shape: &[usize],
        dtype: DType,
    ) -> TensorId {
        let name = format!("{}{}", kind.name(), self.graph.ops.len());
        let output = self.tensor(&name, shape, dtype, Role::Activation);
        self.graph.ops.push(Op {
            name,
            kind,
            inputs: inputs.to_vec(),
            output,
        });
        output
    }
}

/// Lowers `graph` with the planner's selected partitions and verifies it.
pub(crate) fn lowered(graph: &Graph) -> Program {
    let partition = |op: OpId| {
        let signature = OpSignature::of(graph, graph.op(op));
        operator_plans(&signature).selected().partition.clone()
    };
    let program = lower(graph, &partition).expect("lowering");
    verify(graph, &program).expect("verified program");
    program
}

fn check(graph: &Graph, expected: Expect) {
    let program = lowered(graph);
    let names = |op: OpId| graph.op(op).name.clone();
    expected.assert_eq(&program.dump(&names));
}

/// An f16 input `x[64, 128]` cast to F143 and multiplied by an F143 weight
/// `w[128, 64]`; returns the f16 product.
fn cast_then_fp8_matmul(b: &mut Builder) -> TensorId {
    let x = b.tensor("x", &[64, 128], DType::F16, Role::Input);
    let w = b.tensor("w", &[128, 64], DType::F143, Role::Weight);
    let x8 = b.op(OpKind::Cast, &[x], &[64, 128], DType::F143);
    b.op(
        OpKind::Matmul {
            transpose_rhs: false,
            epilogue: Vec::new(),
        },
        &[x8, w],
        &[64, 64],
        DType::F16,
    )
}

#[test]
fn fp8_gemm_with_bias_and_softmax() {
    let mut b = Builder::new(16);
    let y = cast_then_fp8_matmul(&mut b);
    let bias = b.tensor("bias", &[64], DType::F16, Role::Weight);
    let z = b.op(OpKind::Add, &[y, bias], &[64, 64], DType::F16);
    let s = b.op(
        OpKind::Softmax {
            scale: 0.125,
            causal: true,
        },
        &[z],
        &[64, 64],
        DType::F16,
    );
    b.graph.outputs = vec![s];
    check(
        &b.graph,
        expect![[r#"
            compute cast0 on 16 tiles: cast_f16_f143
            exchange 0 (op matmul1): 256 transfers, 8192 bytes delivered
            compute matmul1 on 16 tiles: gemm_f8_interleaved_k128_c32_r8, rearrange_blocks
            exchange 1 (op add2): 256 transfers, 8192 bytes delivered
            compute add2 on 16 tiles: add_f16
            compute softmax3 on 16 tiles: softmax_f16_causal
            buffers 144 on 16 tiles
              tile 0: 9216 bytes
              tile 1: 9216 bytes
              tile 2: 9216 bytes
              tile 3: 9216 bytes
        "#]],
    );
}

#[test]
fn attention_heads_through_views() {
    let mut b = Builder::new(8);
    let q = b.tensor("q", &[16, 32], DType::F16, Role::Input);
    let k = b.tensor("k", &[16, 32], DType::F16, Role::Input);
    let qh = b.op(OpKind::Reshape, &[q], &[16, 2, 16], DType::F16);
    let qt = b.op(
        OpKind::Transpose {
            perm: vec![1, 0, 2],
        },
        &[qh],
        &[2, 16, 16],
        DType::F16,
    );
    let kh = b.op(OpKind::Reshape, &[k], &[16, 2, 16], DType::F16);
    let kt = b.op(
        OpKind::Transpose {
            perm: vec![1, 0, 2],
        },
        &[kh],
        &[2, 16, 16],
        DType::F16,
    );
    let s = b.op(
        OpKind::Matmul {
            transpose_rhs: true,
            epilogue: Vec::new(),
        },
        &[qt, kt],
        &[2, 16, 16],
        DType::F16,
    );
    let p = b.op(
        OpKind::Softmax {
            scale: 0.25,
            causal: false,
        },
        &[s],
        &[2, 16, 16],
        DType::F16,
    );
    b.graph.outputs = vec![p];
    check(
        &b.graph,
        expect![[r#"
            compute matmul4 on 8 tiles: gemm_f16_interleaved_k16_c16_r4
            exchange 0 (op softmax5): 8 transfers, 1024 bytes delivered
            compute softmax5 on 8 tiles: softmax_f16
            buffers 40 on 8 tiles
              tile 0: 1024 bytes
              tile 1: 1024 bytes
              tile 2: 1024 bytes
              tile 3: 1024 bytes
        "#]],
    );
}

#[test]
fn repeats_are_lowered_once_with_per_iteration_weights() {
    let mut b = Builder::new(4);
    let x = b.tensor("x", &[8, 16], DType::F16, Role::Input);
    let h = b.tensor("h", &[8, 16], DType::F16, Role::Activation);
    let w = b.tensor("w", &[16, 16], DType::F16, Role::Weight);
    b.graph.tensors[w.0 as usize].repeat = Some(0);
    let first = b.graph.ops.len() as u32;
    let y = b.op(
        OpKind::Matmul {
            transpose_rhs: false,
            epilogue: Vec::new(),
        },
        &[h, w],
        &[8, 16],
        DType::F16,
    );
    let r = b.op(OpKind::Add, &[y, h], &[8, 16], DType::F16);
    let out = b.tensor("out", &[8, 16], DType::F16, Role::Activation);
    b.graph.repeats.push(Repeat {
        name: "layers".into(),
        count: 3,
        init: x,
        carry_in: h,
        carry_out: r,
        output: out,
        body: vec![OpId(first), OpId(first + 1)],
    });
    let g = b.op(OpKind::Gelu, &[out], &[8, 16], DType::F16);
    b.graph.outputs = vec![g];
    let graph = b.graph;
    expect![[r#"
        project test target=ipu21 tiles=4 seed=1
        Input x: f16[8, 16] init=Normal { std: 1.0 }
        Weight w: f16[16, 16] init=Normal { std: 1.0 } per-iteration of repeat 0
        repeat layers x3: h = x -> out = add1
            matmul0 = Matmul { transpose_rhs: false, epilogue: [] }(h, w) : f16[8, 16]
            add1 = Add(matmul0, h) : f16[8, 16]
        gelu2 = Gelu(out) : f16[8, 16]
        outputs gelu2
        check Device min_cosine_similarity=0.99 max_abs_error=1 outputs 
    "#]]
    .assert_eq(&graph.dump());
    check(
        &graph,
        expect![[r#"
            repeat 0 x3
              compute matmul0 on 4 tiles: gemm_f16_interleaved_k16_c16_r2, rearrange_blocks
              exchange 0 (op add1): 4 transfers, 256 bytes delivered
              compute add1 on 4 tiles: add_f16
              exchange 1 (carry layers): 4 transfers, 256 bytes delivered
            compute gelu2 on 4 tiles: gelu_f16
            buffers 36 on 4 tiles
              tile 0: 1920 bytes
              tile 1: 1920 bytes
              tile 2: 1920 bytes
              tile 3: 1920 bytes
        "#]],
    );
}

/// The part of a GEMM operand a tile holds itself is laid out block-major
/// by a `rearrange_blocks` run before the GEMM on that tile, and never by
/// an on-tile transfer of the exchange; the verifier counts its writes.
#[test]
fn held_rows_of_a_gemm_operand_are_rearranged_by_a_kernel_run() {
    let mut b = Builder::new(16);
    let y = cast_then_fp8_matmul(&mut b);
    b.graph.outputs = vec![y];
    let program = lowered(&b.graph);
    let Some(Step::Compute { runs, .. }) = program.steps.last() else {
        panic!("the matmul's compute step comes last");
    };
    let rearranges: Vec<&KernelRun> = runs
        .iter()
        .filter(|r| r.kernel == crate::lower::local::KERNEL)
        .collect();
    assert!(!rearranges.is_empty(), "{runs:?}");
    for run in &rearranges {
        // Before the GEMM on its tile.
        let at = |kernel: &dyn Fn(&KernelRun) -> bool| {
            runs.iter().position(|r| r.tile == run.tile && kernel(r))
        };
        assert!(
            at(&|r| r.kernel == crate::lower::local::KERNEL)
                < at(&|r| matches!(r.kernel, crate::partition::KernelId::Gemm { .. })),
            "{runs:?}"
        );
    }
    for phase in &program.phases {
        for transfer in &phase.transfers {
            let source = program.buffer(transfer.source).tile;
            for (destination, _) in &transfer.destinations {
                let buffer = program.buffer(*destination);
                assert!(
                    buffer.tile != source
                        || !matches!(
                            buffer.piece.layout,
                            crate::lower::layout::Layout::KBlocks { .. }
                        ),
                    "an on-tile transfer into a blocked operand on tile {source}"
                );
            }
        }
    }
    // Without the rearranges, the held slots are never written.
    let mut without = program.clone();
    if let Some(Step::Compute { runs, .. }) = without.steps.last_mut() {
        runs.retain(|r| r.kernel != crate::lower::local::KERNEL);
    }
    let error = verify(&b.graph, &without).unwrap_err().to_string();
    assert!(error.contains("written 0 times, expected 1"), "{error}");
}

/// A product with a long inner dimension on 8 tiles: the planner splits K
/// eight ways (whole columns of the weight do not fit the weight budget).
fn split_inner_graph() -> Graph {
    let mut b = Builder::new(8);
    let x = b.tensor("x", &[20, 1024], DType::F16, Role::Input);
    let w = b.tensor("w", &[1024, 24], DType::F16, Role::Weight);
    let y = b.op(
        OpKind::Matmul {
            transpose_rhs: false,
            epilogue: Vec::new(),
        },
        &[x, w],
        &[20, 24],
        DType::F16,
    );
    b.graph.outputs = vec![y];
    b.graph
}

/// Each tile computes f16 partials over its slice of K; a second phase
/// brings every tile the others' partials of its band of rows (3 rows; the
/// last tile's band would start past row 20, so it keeps none) and a reduce
/// run sums them into its home of the output.
#[test]
fn a_split_inner_dimension_is_staged_as_a_reduction() {
    let graph = split_inner_graph();
    check(
        &graph,
        expect![[r#"
            compute matmul0 on 8 tiles: gemm_f16_interleaved_k128_c24_r20
            exchange 0 (op matmul0 reduction): 216 transfers, 7680 bytes delivered
            compute matmul0 on 7 tiles: reduce_add_f16
            buffers 38 on 8 tiles
              tile 0: 16320 bytes
              tile 1: 16320 bytes
              tile 2: 16320 bytes
              tile 3: 16320 bytes
        "#]],
    );
    let program = lowered(&graph);
    let reduces: Vec<&KernelRun> = program
        .kernel_runs()
        .into_iter()
        .filter(|r| r.kernel == crate::partition::KernelId::ReduceAdd)
        .collect();
    assert_eq!(reduces.len(), 7);
    for run in &reduces {
        let count = run.params.iter().find(|(n, _)| n == "count");
        assert_eq!(count, Some(&("count".to_string(), 8)), "{run:?}");
    }
    let homes: Vec<&Buffer> = program
        .buffers
        .iter()
        .filter(|b| matches!(b.role, BufferRole::Activation { .. }))
        .collect();
    let rows: Vec<usize> = homes.iter().map(|b| b.piece.extent[1]).collect();
    assert_eq!(rows, [3, 3, 3, 3, 3, 3, 2]);
}

/// A split product whose epilogue adds a bias and a residual: the
/// reduction runs both adds (`reduce_add_f16_plus2`), reading each addend
/// gathered into its home's piece, and no add runs after it.
#[test]
fn a_reduction_runs_the_epilogues_leading_adds() {
    let mut b = Builder::new(8);
    let x = b.tensor("x", &[20, 1024], DType::F16, Role::Input);
    let w = b.tensor("w", &[1024, 24], DType::F16, Role::Weight);
    let bias = b.tensor("bias", &[24], DType::F16, Role::Weight);
    let residual = b.tensor("residual", &[20, 24], DType::F16, Role::Input);
    let y = b.op(
        OpKind::Matmul {
            transpose_rhs: false,
            epilogue: vec![EpilogueStep::Add, EpilogueStep::Add],
        },
        &[x, w, bias, residual],
        &[20, 24],
        DType::F16,
    );
    b.graph.outputs = vec![y];
    let program = lowered(&b.graph);
    let runs = program.kernel_runs();
    assert!(
        runs.iter()
            .all(|r| r.kernel != crate::partition::KernelId::Add { dtype: DType::F16 }),
        "{runs:?}"
    );
    let reduces: Vec<&KernelRun> = runs
        .into_iter()
        .filter(|r| r.kernel == crate::partition::KernelId::ReduceAddPlus { addends: 2 })
        .collect();
    assert_eq!(reduces.len(), 7);
    for run in &reduces {
        // The partials, the two addends, the home: all on the run's tile,
        // the addends and the home over the same slots.
        let buffers: Vec<&Buffer> = run
            .operands
            .iter()
            .map(|o| match o {
                OperandRef::Buffer(id) => program.buffer(*id),
                OperandRef::PerIteration(_) => panic!("{run:?}"),
            })
            .collect();
        assert_eq!(buffers.len(), 4, "{run:?}");
        assert!(buffers.iter().all(|b| b.tile == run.tile), "{run:?}");
        let slots = buffers[3].piece.slots();
        assert_eq!(buffers[1].piece.slots(), slots);
        assert_eq!(buffers[2].piece.slots(), slots);
    }
}

/// The verifier checks that each K slice's partials cover the product
/// exactly once: here slice 3's buffer is mislabelled as slice 4's.
#[test]
fn partials_that_miss_an_element_fail_verification() {
    let graph = split_inner_graph();
    let mut program = lowered(&graph);
    let partial = program
        .buffers
        .iter_mut()
        .find(|b| matches!(b.role, BufferRole::Partial { slice: 3, .. }))
        .expect("a partial buffer of slice 3");
    let BufferRole::Partial { slice, .. } = &mut partial.role else {
        unreachable!("found by its role");
    };
    *slice = 4;
    let error = verify(&graph, &program).unwrap_err().to_string();
    assert!(
        error.contains("(K slice 4) is held by 2 partial buffers, expected 1"),
        "{error}"
    );
}

/// The swapped orientation with a split K: the kernel reads the transposed
/// operands, the partials and the homes are row blocks, and the program
/// verifies (every operand byte written once, partials and homes cover the
/// product once).
#[test]
fn a_swapped_split_product_lowers_to_row_blocks_and_verifies() {
    use crate::lower::layout::Layout;
    use crate::plan::matmul::{Grid, Shard};
    use crate::plan::Partition;
    let graph = split_inner_graph();
    let partition = Partition::Matmul {
        grid: Grid {
            batch: 1,
            rows: 1,
            cols: 1,
            inner: 2,
        },
        shard: Shard {
            batch: 1,
            rows: 20,
            inner: 512,
            cols: 24,
        },
        weights: crate::plan::cost::MemoryClass::Interleaved,
        swapped: true,
        kernel: crate::partition::KernelId::Gemm {
            fp8: false,
            interleaved: true,
            k: 512,
            c: 20,
            r: 24,
        },
    };
    let program = lower(&graph, &|_| partition.clone()).expect("lowering");
    verify(&graph, &program).expect("verified program");
    let layouts: Vec<(Layout, &BufferRole)> = program
        .buffers
        .iter()
        .filter(|b| {
            matches!(
                b.role,
                BufferRole::Activation { .. } | BufferRole::Partial { .. }
            )
        })
        .map(|b| (b.piece.layout, &b.role))
        .collect();
    assert_eq!(layouts.len(), 4, "{layouts:?}");
    assert!(
        layouts.iter().all(|(l, _)| *l == Layout::RowBlocks),
        "{layouts:?}"
    );
    let gemm = program
        .kernel_runs()
        .into_iter()
        .find(|r| matches!(r.kernel, crate::partition::KernelId::Gemm { .. }))
        .expect("a GEMM run");
    let param = |name: &str| gemm.params.iter().find(|(n, _)| n == name).map(|p| p.1);
    // The kernel's rows are the product's columns and the other way round.
    assert_eq!((param("rows"), param("cols")), (Some(24), Some(20)));
}

/// `[2, 3, 16]` and a slice `[2, 5 of 7, 16]` of an activation joined
/// along the middle axis on 3 tiles, then a transposed activation joined
/// to that along the last axis, read by a matrix product: each concat is
/// one exchange phase and no compute step, and the verifier finds every
/// output slot written once.
#[test]
fn concat_is_an_exchange_phase_without_a_kernel() {
    let mut b = Builder::new(3);
    let a = b.tensor("a", &[2, 3, 16], DType::F16, Role::Input);
    let x = b.tensor("x", &[2, 7, 16], DType::F16, Role::Input);
    let g = b.op(OpKind::Gelu, &[x], &[2, 7, 16], DType::F16);
    let cut = b.op(
        OpKind::Slice { axis: 1, start: 1 },
        &[g],
        &[2, 5, 16],
        DType::F16,
    );
    let middle = b.op(
        OpKind::Concat { axis: 1 },
        &[a, cut],
        &[2, 8, 16],
        DType::F16,
    );
    let t = b.tensor("t", &[2, 16, 8], DType::F16, Role::Input);
    let tg = b.op(OpKind::Gelu, &[t], &[2, 16, 8], DType::F16);
    let tt = b.op(
        OpKind::Transpose {
            perm: vec![0, 2, 1],
        },
        &[tg],
        &[2, 8, 16],
        DType::F16,
    );
    let wide = b.op(
        OpKind::Concat { axis: 2 },
        &[middle, tt],
        &[2, 8, 32],
        DType::F16,
    );
    let w = b.tensor("w", &[32, 16], DType::F16, Role::Weight);
    let y = b.op(
        OpKind::Matmul {
            transpose_rhs: false,
            epilogue: Vec::new(),
        },
        &[wide, w],
        &[2, 8, 16],
        DType::F16,
    );
    b.graph.outputs = vec![middle, y];
    let program = lowered(&b.graph);
    // The first tile's piece of `middle` is rows 0..6 of [16, 16]: a's
    // three rows of batch 0, then rows 1..4 of the slice.
    let home: Vec<&Buffer> = program
        .buffers
        .iter()
        .filter(|buffer| buffer.role == BufferRole::Activation { tensor: middle })
        .collect();
    assert_eq!(home[0].piece.extent, [6, 16]);
    check(
        &b.graph,
        expect![[r#"
            compute gelu0 on 3 tiles: gelu_f16
            exchange 0 (op concat2): 10 transfers, 512 bytes delivered
            compute gelu3 on 3 tiles: gelu_f16
            exchange 1 (op concat5): 272 transfers, 1024 bytes delivered
            exchange 2 (op matmul6): 12 transfers, 384 bytes delivered
            compute matmul6 on 2 tiles: gemm_f16_interleaved_k32_c16_r8, rearrange_blocks
            buffers 27 on 3 tiles
              tile 0: 3104 bytes
              tile 1: 3104 bytes
              tile 2: 1024 bytes
        "#]],
    );
}

/// A concat output slot written twice is a compiler bug the verifier
/// names, though no kernel reads the buffer as an operand.
#[test]
fn the_verifier_finds_a_concat_slot_written_twice() {
    let mut b = Builder::new(2);
    let a = b.tensor("a", &[4, 8], DType::F16, Role::Input);
    let g = b.op(OpKind::Gelu, &[a], &[4, 8], DType::F16);
    let joined = b.op(OpKind::Concat { axis: 0 }, &[g, g], &[8, 8], DType::F16);
    b.graph.outputs = vec![joined];
    let mut program = lowered(&b.graph);
    let phase = program
        .phases
        .iter_mut()
        .find(|phase| phase.purpose == ExchangePhase::gather_purpose("concat1"))
        .expect("the concat's phase");
    let again = phase.transfers[0].clone();
    phase.transfers.push(again);
    let error = verify(&b.graph, &program).expect_err("a slot written twice");
    assert!(error.0.contains("is written 2 times"), "{error}");
}

/// Two products of one FP8 activation with weights of the same shape have
/// the same plan, so each tile needs the same piece of the activation for
/// both: the second reads the buffer the first gathered (and rearranged)
/// rather than gathering it again.
#[test]
fn products_of_one_activation_share_its_gathered_pieces() {
    let mut b = Builder::new(16);
    let x = b.tensor("x", &[64, 128], DType::F16, Role::Input);
    let x8 = b.op(OpKind::Cast, &[x], &[64, 128], DType::F143);
    let product = OpKind::Matmul {
        transpose_rhs: false,
        epilogue: Vec::new(),
    };
    let mut outputs = Vec::new();
    for name in ["w1", "w2"] {
        let w = b.tensor(name, &[128, 64], DType::F143, Role::Weight);
        outputs.push(b.op(product.clone(), &[x8, w], &[64, 64], DType::F16));
    }
    b.graph.outputs = outputs;
    let program = lowered(&b.graph);
    let (first, second) = (OpId(1), OpId(2));
    let operand_of = |op: OpId| {
        let runs = program.steps.iter().find_map(|step| match step {
            Step::Compute { op: o, runs } if *o == op => Some(runs),
            _ => None,
        });
        let gemms = runs
            .expect("a compute step")
            .iter()
            .filter(|r| matches!(r.kernel, crate::partition::KernelId::Gemm { .. }));
        gemms
            .map(|r| match &r.operands[0] {
                OperandRef::Buffer(id) => (r.tile, *id),
                other => panic!("{other:?}"),
            })
            .collect::<Vec<_>>()
    };
    let (ones, twos) = (operand_of(first), operand_of(second));
    assert!(!ones.is_empty());
    assert_eq!(ones, twos);
    for (_, id) in &ones {
        let role = &program.buffer(*id).role;
        assert!(
            matches!(role, BufferRole::Operand { op, operand: 0 } if *op == first),
            "{role:?}"
        );
    }
    assert!(!program
        .buffers
        .iter()
        .any(|b| matches!(b.role, BufferRole::Operand { op, operand: 0 } if op == second)));
}

/// A causal softmax dealt out folded: each tile runs the kernel twice, on
/// four rows from either end of its matrix (the kernel's `first_row`
/// places them in the matrix), and the homes cover the result once.
#[test]
fn a_folded_causal_softmax_runs_twice_on_each_tile() {
    use crate::partition::KernelId;
    use crate::plan::Partition;
    let mut b = Builder::new(6);
    let x = b.tensor("x", &[2, 24, 16], DType::F16, Role::Input);
    let p = b.op(
        OpKind::Softmax {
            scale: 0.25,
            causal: true,
        },
        &[x],
        &[2, 24, 16],
        DType::F16,
    );
    b.graph.outputs = vec![p];
    let partition = Partition::Rows {
        rows: 48,
        row_length: 16,
        rows_per_tile: 8,
        kernel: KernelId::Softmax {
            dtype: DType::F16,
            causal: true,
            exp_once: false,
        },
        folded: true,
    };
    let program = lower(&b.graph, &|_| partition.clone()).expect("lowering");
    verify(&b.graph, &program).expect("verified program");
    let param = |run: &KernelRun, name: &str| {
        run.params
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
            .unwrap()
    };
    let runs: Vec<(u32, i64, i64)> = program
        .kernel_runs()
        .iter()
        .map(|r| (r.tile, param(r, "first_row"), param(r, "rows")))
        .collect();
    assert_eq!(
        runs,
        vec![
            (0, 0, 4),
            (0, 20, 4),
            (1, 4, 4),
            (1, 16, 4),
            (2, 8, 4),
            (2, 12, 4),
            (3, 24, 4),
            (3, 44, 4),
            (4, 28, 4),
            (4, 40, 4),
            (5, 32, 4),
            (5, 36, 4),
        ]
    );
}

/// A product with a split K whose result a layer norm reads by rows,
/// with the partitions given: `swapped` chooses the product's orientation.
fn split_product_then_layernorm(swapped: bool) -> (Graph, Program) {
    use crate::partition::KernelId;
    use crate::plan::matmul::{Grid, Shard};
    use crate::plan::Partition;
    let mut b = Builder::new(16);
    let x = b.tensor("x", &[64, 512], DType::F16, Role::Input);
    let w = b.tensor("w", &[512, 64], DType::F16, Role::Weight);
    let g = b.tensor("g", &[64], DType::F16, Role::Weight);
    let beta = b.tensor("beta", &[64], DType::F16, Role::Weight);
    let h = b.op(
        OpKind::Matmul {
            transpose_rhs: false,
            epilogue: Vec::new(),
        },
        &[x, w],
        &[64, 64],
        DType::F16,
    );
    let y = b.op(
        OpKind::Layernorm { epsilon: 1e-5 },
        &[h, g, beta],
        &[64, 64],
        DType::F16,
    );
    b.graph.outputs = vec![y];
    let (c, r) = if swapped { (16, 64) } else { (64, 16) };
    let product = Partition::Matmul {
        grid: Grid {
            batch: 1,
            rows: 4,
            cols: 1,
            inner: 4,
        },
        shard: Shard {
            batch: 1,
            rows: 16,
            inner: 128,
            cols: 64,
        },
        weights: crate::plan::cost::MemoryClass::Interleaved,
        swapped,
        kernel: KernelId::Gemm {
            fp8: false,
            interleaved: true,
            k: 128,
            c,
            r,
        },
    };
    let norm = Partition::Rows {
        rows: 64,
        row_length: 64,
        rows_per_tile: 4,
        kernel: KernelId::Layernorm { dtype: DType::F16 },
        folded: false,
    };
    let program = lower(&b.graph, &|op: OpId| match op.0 {
        0 => product.clone(),
        _ => norm.clone(),
    })
    .expect("lowering");
    verify(&b.graph, &program).expect("verified program");
    (b.graph, program)
}

/// The layer norm's tiles reduce the product's partials of the rows they
/// normalise, so those rows are in place and the norm gathers nothing; in
/// the swapped orientation (partials in row blocks, which rows would
/// gather one element per transfer) the groups reduce their bands and the
/// norm gathers its rows.
#[test]
fn a_split_product_read_by_a_norm_reduces_into_the_norms_rows() {
    let names = |graph: &Graph| {
        let graph = graph.clone();
        move |op: OpId| graph.op(op).name.clone()
    };
    let (graph, program) = split_product_then_layernorm(false);
    let dump = program.dump(&names(&graph));
    assert!(!dump.contains("(op layernorm1)"), "{dump}");
    assert!(dump.contains("(op matmul0 reduction)"), "{dump}");
    let homes: Vec<(u32, Vec<usize>, Vec<usize>)> = program
        .buffers
        .iter()
        .filter(|b| matches!(b.role, BufferRole::Activation { tensor } if tensor == graph.ops[0].output))
        .map(|b| (b.tile, b.piece.start.clone(), b.piece.extent.clone()))
        .collect();
    assert_eq!(homes.len(), 16, "{homes:?}");
    for (tile, start, extent) in homes {
        assert_eq!(start, vec![0, 4 * tile as usize, 0]);
        assert_eq!(extent, vec![1, 4, 64]);
    }
    let (graph, program) = split_product_then_layernorm(true);
    let dump = program.dump(&names(&graph));
    assert!(dump.contains("(op layernorm1)"), "{dump}");
}

/// The planner counts a batched product's GEMM buffers as lowering lays
/// them out, padding included: every finalist with a whole inner
/// dimension on each tile needs, on its busiest tile, exactly the bytes
/// the planner estimated, and keeps exactly the weight bytes it estimated
/// resident. Tiny inner dimensions and columns pad each batch to a whole
/// AMP block (512 bytes of weights for a `[2, 1]` matrix), which an
/// estimate of elements alone missed by a factor of thirty-two.
#[test]
fn batched_gemm_estimates_count_the_bytes_lowering_lays_out() {
    use crate::plan::Partition;
    let shapes = [
        (64, 1, 2, 1, 5),
        (96, 3, 5, 7, 4),
        (40, 2, 2, 2, 16),
        (8, 20, 40, 3, 2),
    ];
    for (batch, m, k, n, tiles) in shapes {
        for dtype in [DType::F16, DType::F143] {
            let mut b = Builder::new(tiles);
            let x = b.tensor("x", &[batch, m, k], dtype, Role::Input);
            let w = b.tensor("w", &[batch, k, n], dtype, Role::Weight);
            let kind = OpKind::Matmul {
                transpose_rhs: false,
                epilogue: Vec::new(),
            };
            b.op(kind, &[x, w], &[batch, m, n], DType::F16);
            let graph = b.graph;
            let signature = OpSignature::of(&graph, &graph.ops[0]);
            let plans = crate::plan::finalists(&signature, signature.target.spec());
            for candidate in &plans.finalists {
                let Partition::Matmul { grid, .. } = &candidate.partition else {
                    panic!("a matmul plan: {:?}", candidate.partition);
                };
                if grid.inner > 1 {
                    continue;
                }
                let partition = candidate.partition.clone();
                let program = lower(&graph, &|_| partition.clone()).expect("lowering");
                verify(&graph, &program).expect("verified program");
                let mut per_tile = std::collections::BTreeMap::<u32, (u64, u64)>::new();
                for buffer in &program.buffers {
                    let entry = per_tile.entry(buffer.tile).or_default();
                    entry.0 += u64::from(buffer.bytes());
                    if let BufferRole::Weight { .. } = buffer.role {
                        entry.1 += u64::from(buffer.bytes());
                    }
                }
                let busiest = per_tile.values().copied().max().unwrap_or_default();
                let e = &candidate.estimate;
                assert_eq!(
                    busiest,
                    (e.peak_total_bytes(), e.resident_weight_bytes),
                    "{} {:?}",
                    signature,
                    candidate.partition
                );
            }
        }
    }
}
