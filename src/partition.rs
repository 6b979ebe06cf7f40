//! The vocabulary plans are written in, shared by the planner, which
//! chooses them, and lowering, which carries them out: how an operation is
//! spread over tiles ([`Partition`]), the grid and shard of a matrix
//! product, where a tile keeps an operand ([`MemoryClass`]), and which
//! kernel each tile runs ([`KernelId`]).
//!
//! Nothing here knows how plans are found or lowered; both `plan` and
//! `lower` stand on this module, so neither needs the other.

use crate::graph::DType;
use crate::graph::EpilogueStep;
use crate::graph::Reduction;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Where a tile keeps an operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MemoryClass {
    /// Region 0 (non-interleaved; shared with code).
    Standard,
    /// Region 1 (interleaved; 128-bit loads, two loads per cycle).
    Interleaved,
}

/// How many parts each dimension of a matrix product is cut into; the
/// product is the tile count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Grid {
    pub batch: u32,
    pub rows: u32,
    pub cols: u32,
    pub inner: u32,
}

impl Grid {
    pub(crate) fn tiles(&self) -> u32 {
        self.batch * self.rows * self.cols * self.inner
    }
}

/// The extents of the largest shard of a matrix product one tile computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Shard {
    pub batch: usize,
    pub rows: usize,
    pub inner: usize,
    pub cols: usize,
}

/// Rows of an output shard of `rows` rows each tile of a reduction group
/// of `inner` tiles sums and keeps.
pub(crate) fn reduced_rows(rows: usize, inner: u32) -> usize {
    rows.div_ceil(inner as usize)
}

/// The rows of each matrix of a tensor of `shape`: its next-to-last
/// extent (1 for a vector), where a causal softmax's mask restarts.
pub(crate) fn matrix_rows(shape: &[usize]) -> usize {
    match shape.len() {
        0 | 1 => 1,
        n => shape[n - 2],
    }
}

/// Whether `kernel` over `rows` rows, in matrices of `matrix_rows`, can be
/// dealt out folded `rows_per_tile` to a tile: a causal softmax, with an
/// even count that divides the matrix's rows into at least two tiles'
/// worth.
pub(crate) fn can_fold(
    kernel: KernelId,
    rows: usize,
    matrix_rows: usize,
    rows_per_tile: usize,
) -> bool {
    matches!(kernel, KernelId::Softmax { causal: true, .. })
        && rows_per_tile >= 2
        && rows_per_tile.is_multiple_of(2)
        && matrix_rows > rows_per_tile
        && matrix_rows.is_multiple_of(rows_per_tile)
        && rows.is_multiple_of(matrix_rows)
}

/// The rows each tile of a [`Partition::Rows`] runs its kernel over, as
/// `(tile, first row, rows)`, by tile. Unfolded, tile `t` takes the
/// `rows_per_tile` rows from `t * rows_per_tile` (the last tile fewer).
/// Folded ([`can_fold`]), the rows of each matrix of `matrix_rows` are cut
/// into chunks of half a tile's rows, and its `j`th tile takes chunk `j`
/// and chunk `j` counted from the matrix's end: in a causal softmax, row
/// `i` keeps `i + 1` elements, so every tile keeps the same number.
pub(crate) fn row_chunks(
    rows: usize,
    rows_per_tile: usize,
    matrix_rows: usize,
    folded: bool,
) -> Vec<(u32, usize, usize)> {
    let rows_per_tile = rows_per_tile.max(1);
    if !folded {
        return (0..rows)
            .step_by(rows_per_tile)
            .enumerate()
            .map(|(tile, first)| (tile as u32, first, rows_per_tile.min(rows - first)))
            .collect();
    }
    let half = rows_per_tile / 2;
    let per_matrix = matrix_rows / rows_per_tile;
    (0..rows / rows_per_tile)
        .flat_map(|tile| {
            let matrix = tile / per_matrix * matrix_rows;
            let j = tile % per_matrix;
            [
                (tile as u32, matrix + j * half, half),
                (tile as u32, matrix + matrix_rows - (j + 1) * half, half),
            ]
        })
        .collect()
}

/// How an operation is spread over tiles.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Partition {
    /// A matrix product cut over a grid; each tile runs `kernel` on a shard.
    Matmul {
        grid: Grid,
        shard: Shard,
        weights: MemoryClass,
        /// The orientation: when set, each tile's kernel computes the
        /// transposed product, streaming the right operand's columns and
        /// holding the left operand's rows as AMP weights (worth it when a
        /// shard has few rows and many columns).
        swapped: bool,
        kernel: KernelId,
    },
    /// The leading dimensions, flattened to rows, split over tiles; each row
    /// (the last axis) stays whole on one tile.
    Rows {
        rows: usize,
        row_length: usize,
        rows_per_tile: usize,
        kernel: KernelId,
        /// Each matrix's rows dealt out folded ([`row_chunks`]): a tile
        /// takes two half chunks, one from each end of its matrix, so that
        /// a causal softmax's tiles keep equal work.
        folded: bool,
    },
    /// The rows of a layer or RMS normalisation or a softmax grouped
    /// `rows_per_tile` at a time as for [`Partition::Rows`], and each row
    /// cut into segments of `segment` elements (the last may be shorter),
    /// each segment of a group on a tile of its own: group `g`'s segment
    /// `s` is on tile `g * segments + s`. Each tile computes its segments'
    /// partial statistics ([`norm_prologue`] of `kernel`) and folds them
    /// into one record per row ([`segment_fold`]), an exchange phase gives
    /// every tile of a group the others' records, and `kernel` (a segmented
    /// [`KernelId::LayernormParts`] or [`KernelId::RmsnormParts`], or
    /// [`KernelId::SoftmaxParts`]) combines them and writes the tile's
    /// segments. For rows too few to fill the chip one to a tile, and for
    /// tiles with fewer long rows than workers (one segment, no exchange
    /// of records).
    Segments {
        rows: usize,
        row_length: usize,
        rows_per_tile: usize,
        segment: usize,
        kernel: KernelId,
    },
    /// An elementwise operation over its `elements` in row-major order,
    /// cut into consecutive ranges of `per_tile` elements (the last range
    /// may be shorter), one range to a tile, wherever rows begin and end.
    /// Only for kernels without a row dependency
    /// ([`KernelId::is_elementwise`]): they read their operands as dense
    /// arrays, so a range is presented to them as `count` rows of one
    /// element, and the work spreads over every tile that helps even when
    /// the tensor has fewer rows than the chip has tiles. Broadcast
    /// operands (a bias row) are read through their view, so each tile
    /// receives the part under its range.
    Elements {
        elements: usize,
        per_tile: usize,
        kernel: KernelId,
    },
    /// No device work: a view of its input.
    View,
    /// The output's leading dimensions, flattened to rows, split over tiles
    /// like [`Partition::Rows`], but no kernel runs: the exchange that
    /// gathers each tile's rows from the inputs writes them straight into
    /// the output's buffers (a `concat`).
    Gathered {
        rows: usize,
        row_length: usize,
        rows_per_tile: usize,
    },
}

/// A kernel variant: which source, entry and defines a tile runs. Plans
/// and programs carry these; the kernel's name (`gemm_f8_k64_c16_r16`, in
/// the seeds' style) is derived from it for logs, packages and the cache,
/// and never read back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum KernelId {
    /// The AMP GEMM: inputs f16 or FP8, operands in `memory`, compiled for
    /// shards of at most `k` x `c` x `r` (inner, columns, rows).
    Gemm {
        fp8: bool,
        interleaved: bool,
        k: u32,
        c: u32,
        r: u32,
    },
    /// Element type conversion.
    Cast {
        from: DType,
        to: DType,
    },
    /// Elementwise add of two tensors of `dtype`.
    Add {
        dtype: DType,
    },
    /// GELU of `dtype` values; with `add`, of the sum of two operands,
    /// rounded to f16 first (an `add` fused into the GELU, `crate::fuse`).
    Gelu {
        dtype: DType,
        add: bool,
    },
    /// GELU of f16 values stored as `to` (an FP8 format) with the result's
    /// scale: a cast to FP8 fused into the GELU (`crate::fuse`); `add` as
    /// for [`KernelId::Gelu`].
    GeluCast {
        to: DType,
        add: bool,
    },
    /// Softmax of `dtype` rows; with `exp_once`, whole rows store their
    /// exponentials and rescale them rather than computing them twice (a
    /// variant within about 1.5 f16 ulp instead of one, used only when a
    /// cast to FP8 follows: [`cast_epilogue`]).
    Softmax {
        dtype: DType,
        causal: bool,
        exp_once: bool,
    },
    Layernorm {
        dtype: DType,
    },
    /// Layer normalisation of f16 rows stored as `to` (an FP8 format) with
    /// the result's scale: a cast to FP8 fused into the layernorm
    /// (`crate::fuse`).
    LayernormCast {
        to: DType,
    },
    /// The statistics half of the split layernorm
    /// (`device/layernorm_stats_f16.S`): each worker writes the partial
    /// statistics of its part of every row to a tile-local buffer, which
    /// [`KernelId::LayernormParts`] reads in the same compute step
    /// ([`norm_prologue`]).
    LayernormStats,
    /// The normalising half of the split layernorm: each worker combines
    /// the partial statistics of every row and writes its part of the row,
    /// as f16 or stored as `out`, an FP8 format; `segmented`, the form for
    /// rows cut into segments on several tiles ([`Partition::Segments`]),
    /// which combines the row's record of each segment ([`segment_fold`]).
    LayernormParts {
        out: DType,
        segmented: bool,
    },
    /// The statistics half of the split RMS norm (`device/layernorm_stats_f16.S`
    /// with `RMS`): the sum of squares of each worker's share of every row.
    RmsnormStats,
    /// The normalising half of the split RMS norm (`device/rmsnorm_f16.S`
    /// with `PARTS`); `segmented` as for [`KernelId::LayernormParts`].
    RmsnormParts {
        segmented: bool,
    },
    /// The statistics kernel of a softmax's split and segmented forms
    /// (`device/softmax_f16.S` with `STATS`): each worker writes the
    /// maximum and the sum of exponentials of its share of every row to
    /// the tile's six records of the row. `exp_once`: the form before
    /// [`KernelId::SoftmaxPartsOnce`], which also stores each exponential
    /// as f16.
    SoftmaxStats {
        exp_once: bool,
    },
    /// The output kernel of a softmax whose rows are cut into segments on
    /// several tiles ([`Partition::Segments`]; `SEGMENTED`): each worker
    /// combines the row's record of each segment and writes its share of
    /// the row.
    SoftmaxParts,
    /// The output kernel of the split softmax stored as FP8
    /// (`device/softmax_f16.S` with `PARTS` and `EXP_ONCE`): each worker
    /// combines the tile's six records of a row and rescales the
    /// exponentials [`KernelId::SoftmaxStats`] stored for its share, then
    /// stores them as `out`, an FP8 format.
    SoftmaxPartsOnce {
        out: DType,
    },
    /// Folds the six records of each row a statistics kernel wrote on a
    /// tile into the tile's one record of the row in a segmented plan's
    /// records (`device/fold_records.S`): Chan's formula for the norms'
    /// records, or a softmax's maximum and rescaled sum.
    FoldRecords {
        softmax: bool,
    },
    /// An explicit block-major rearrange (`rearrange` in a project).
    RearrangeBlockMajor {
        dtype: DType,
        rows: usize,
        cols: usize,
    },
    /// Block copies laying out the part of a GEMM operand a tile already
    /// holds (`lower::local`).
    RearrangeBlocks,
    /// Sums the f16 partials of a matrix product with a split inner
    /// dimension.
    ReduceAdd,
    /// Sums the f16 partials as [`KernelId::ReduceAdd`] does, then adds
    /// `addends` (1 or 2) f16 operands of the same slots to the sums, each
    /// addition rounded to f16: the leading adds of a product's epilogue
    /// (a bias, a residual) run by its reduction (`device/reduce_add.S`
    /// with `ADDENDS`).
    ReduceAddPlus {
        addends: u8,
    },
    /// Sums the f16 partials of a matrix product with a split inner
    /// dimension as [`KernelId::ReduceAdd`] does and stores the sums as
    /// `to` (an FP8 format) with the result's scale: the product's cast to
    /// FP8 fused into its reduction (`device/reduce_add.S` with `OUT_F8`).
    ReduceCast {
        to: DType,
    },
    /// Elementwise multiplication, subtraction or division of two tensors
    /// of `dtype` (`device/binary.S`).
    Binary {
        op: BinaryOp,
        dtype: DType,
    },
    /// An elementwise function of one tensor of `dtype`
    /// (`device/unary.S`).
    Unary {
        op: UnaryOp,
        dtype: DType,
    },
    Rmsnorm {
        dtype: DType,
    },
    /// The AMP GEMM with an f32 result (`device/gemm_f16_f32out.S`): f16
    /// inputs, f32 partials between K blocks, operands in `memory`,
    /// compiled for shards of at most `k` x `c` x `r`.
    GemmF32Out {
        interleaved: bool,
        k: u32,
        c: u32,
        r: u32,
    },
    /// Sums the f32 partials of a matrix product with an f32 result and a
    /// split inner dimension (`device/reduce_add_f32.S`).
    ReduceAddF32,
    /// Softmax of `dtype` rows with an additive mask of `mask`, f16 or f32,
    /// materialised at the input's shape (`device/softmax_mask_f16.S`).
    SoftmaxMasked {
        dtype: DType,
        mask: DType,
    },
    /// The statistics kernel of a masked softmax's segmented form
    /// (`device/softmax_mask_f16.S` with `STATS`): as
    /// [`KernelId::SoftmaxStats`], of `x * scale + mask` with a mask of
    /// `mask`; a piece whose every element is removed keeps an empty
    /// record.
    SoftmaxMaskedStats {
        mask: DType,
    },
    /// The output kernel of a masked softmax whose rows are cut into
    /// segments on several tiles (`device/softmax_mask_f16.S` with
    /// `SEGMENTED`), as [`KernelId::SoftmaxParts`].
    SoftmaxMaskedParts {
        mask: DType,
    },
    /// The sum, mean or maximum of each row of `dtype`
    /// (`device/reduce_rows.S`).
    ReduceRows {
        reduction: Reduction,
        dtype: DType,
    },
    /// The f32 partial results of `parts` pieces of each row of `dtype`,
    /// for a segmented reduction ([`reduce_partial`];
    /// `device/reduce_rows.S`): the sum (also a mean's) or the maximum,
    /// neither rounded nor divided.
    ReducePartial {
        reduction: Reduction,
        dtype: DType,
    },
    /// A segmented reduction's result of `out` from rows of f32 partial
    /// results ([`reduce_partials`]; `device/reduce_rows.S`); a mean
    /// divides their sum by the state's `divisor`, the row's length.
    ReducePartials {
        reduction: Reduction,
        out: DType,
    },
}

/// The kernel that reduces pieces of each row of `dtype` into f32 partial
/// results, for a reduction cut into segments: a mean's partials are sums.
pub(crate) fn reduce_partial(reduction: Reduction, dtype: DType) -> KernelId {
    let reduction = match reduction {
        Reduction::Mean => Reduction::Sum,
        other => other,
    };
    KernelId::ReducePartial { reduction, dtype }
}

/// The pieces a segmented reduction's tile cuts each row of its
/// `length`-element segment into, one worker's each: six, or fewer for a
/// segment shorter than six pieces of eight elements.
pub(crate) fn reduce_part_count(length: usize) -> usize {
    (length / 8).clamp(1, 6)
}

/// The length of each of those `parts` pieces but the last, which takes
/// the rest of the row: a multiple of four where that leaves four or more
/// elements, so the pieces of an aligned row start where the kernel's
/// 64-bit loads do.
pub(crate) fn reduce_piece(length: usize, parts: usize) -> usize {
    let piece = length / parts.max(1);
    match piece / 4 * 4 {
        0 => piece,
        aligned => aligned,
    }
}

/// The kernel that reduces rows of f32 partial results into a reduction's
/// results of `out`: the f32 sum and maximum are those of f32 rows.
pub(crate) fn reduce_partials(reduction: Reduction, out: DType) -> KernelId {
    match (reduction, out) {
        (Reduction::Sum | Reduction::Max, DType::F32) => KernelId::ReduceRows {
            reduction,
            dtype: out,
        },
        _ => KernelId::ReducePartials { reduction, out },
    }
}

/// The cast a fused operation runs after `producer` on each tile
/// (`crate::fuse`): when an operation whose kernel writes f16 (rows, or a
/// GEMM's shard, or the reduction of a split K) has an FP8 result, the
/// producer writes to a tile-local buffer and this cast converts it, in the
/// same compute step. `None` for every other kernel and result, among them
/// the GELU and layernorm variants that store FP8 themselves.
pub(crate) fn cast_epilogue(producer: KernelId, output: DType) -> Option<KernelId> {
    let writes_f16 = matches!(
        producer,
        KernelId::Softmax {
            dtype: DType::F16,
            ..
        } | KernelId::SoftmaxMasked {
            dtype: DType::F16,
            ..
        } | KernelId::SoftmaxParts
            | KernelId::SoftmaxMaskedParts { .. }
            | KernelId::Add { dtype: DType::F16 }
            | KernelId::Gemm { .. }
            | KernelId::ReduceAdd
            | KernelId::ReduceAddPlus { .. }
    );
    (writes_f16 && output.is_fp8()).then_some(KernelId::Cast {
        from: DType::F16,
        to: output,
    })
}

/// One kernel run of a matrix product's epilogue: the kernel, and which
/// of the product's extra operands (the inputs after its two factors) it
/// reads besides the running result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EpilogueKernel {
    pub kernel: KernelId,
    pub operand: Option<usize>,
}

/// The kernels that carry out a matrix product's `epilogue` over each
/// tile's f16 result, slot by slot, for a result of `output`: one per
/// step, except that an add followed by a GELU is one run of the GELU of
/// a sum. A result stored as FP8 is stored by the GELU's FP8 variant when
/// a GELU comes last, and by a cast after the last step otherwise. Each
/// run rounds to f16 exactly as the operation it stands for, so the bytes
/// are those of the unfused operations. Empty for an empty epilogue.
pub(crate) fn epilogue_kernels(epilogue: &[EpilogueStep], output: DType) -> Vec<EpilogueKernel> {
    let f16 = DType::F16;
    let mut runs = Vec::new();
    // The binary steps' other operands, in order.
    let mut operands = 0;
    let mut steps = epilogue.iter().peekable();
    while let Some(&step) = steps.next() {
        let kernel = match step {
            EpilogueStep::Add if steps.peek() == Some(&&EpilogueStep::Gelu) => {
                steps.next();
                KernelId::Gelu {
                    dtype: f16,
                    add: true,
                }
            }
            EpilogueStep::Add => KernelId::Add { dtype: f16 },
            EpilogueStep::Mul => KernelId::Binary {
                op: BinaryOp::Mul,
                dtype: f16,
            },
            EpilogueStep::Gelu => KernelId::Gelu {
                dtype: f16,
                add: false,
            },
            EpilogueStep::Silu => KernelId::Unary {
                op: UnaryOp::Silu,
                dtype: f16,
            },
            EpilogueStep::GeluTanh => KernelId::Unary {
                op: UnaryOp::GeluTanh,
                dtype: f16,
            },
        };
        let operand = step.is_binary().then(|| {
            operands += 1;
            operands - 1
        });
        runs.push(EpilogueKernel { kernel, operand });
    }
    if output.is_fp8() && !runs.is_empty() {
        match runs.last_mut() {
            Some(last) if matches!(last.kernel, KernelId::Gelu { .. }) => {
                let add = matches!(last.kernel, KernelId::Gelu { add: true, .. });
                last.kernel = KernelId::GeluCast { to: output, add };
            }
            _ => runs.push(EpilogueKernel {
                kernel: KernelId::Cast {
                    from: f16,
                    to: output,
                },
                operand: None,
            }),
        }
    }
    runs
}

/// The dtype `producer` writes for a result of `output`: f16 when a cast
/// epilogue ([`cast_epilogue`]) stores the result, `output` otherwise.
pub(crate) fn written_dtype(producer: KernelId, output: DType) -> DType {
    match cast_epilogue(producer, output) {
        Some(_) => DType::F16,
        None => output,
    }
}

/// The kernel a split row-normalising kernel runs before it on each tile,
/// in the same compute step: the statistics of every part of the tile's
/// rows, written to a tile-local buffer of [`NORM_PART_RECORDS_PER_ROW`]
/// f32 values per row that `kernel` reads (`device/include/norm.h`).
/// `None` for every other kernel.
pub(crate) fn norm_prologue(kernel: KernelId) -> Option<KernelId> {
    match kernel {
        KernelId::LayernormParts { .. } => Some(KernelId::LayernormStats),
        KernelId::RmsnormParts { .. } => Some(KernelId::RmsnormStats),
        KernelId::SoftmaxParts => Some(KernelId::SoftmaxStats { exp_once: false }),
        KernelId::SoftmaxPartsOnce { .. } => Some(KernelId::SoftmaxStats { exp_once: true }),
        KernelId::SoftmaxMaskedParts { mask } => Some(KernelId::SoftmaxMaskedStats { mask }),
        _ => None,
    }
}

/// The kernel a segmented plan ([`Partition::Segments`]) runs on each tile
/// between [`norm_prologue`]'s statistics and the statistics exchange,
/// folding a row's six records into the tile's one; `None` for a kernel
/// that is not a segmented form.
pub(crate) fn segment_fold(kernel: KernelId) -> Option<KernelId> {
    match kernel {
        KernelId::LayernormParts {
            segmented: true, ..
        }
        | KernelId::RmsnormParts { segmented: true } => {
            Some(KernelId::FoldRecords { softmax: false })
        }
        KernelId::SoftmaxParts | KernelId::SoftmaxMaskedParts { .. } => {
            Some(KernelId::FoldRecords { softmax: true })
        }
        _ => None,
    }
}

/// The split form of a row-normalising kernel, if it has one: the same
/// result from [`norm_prologue`]'s statistics and a normalising kernel in
/// which each worker writes an equal share of the tile's elements,
/// whatever the rows (`device/include/norm.h`).
pub(crate) fn split_norm(kernel: KernelId) -> Option<KernelId> {
    match kernel {
        KernelId::Layernorm { dtype: DType::F16 } => Some(KernelId::LayernormParts {
            out: DType::F16,
            segmented: false,
        }),
        KernelId::LayernormCast { to } => Some(KernelId::LayernormParts {
            out: to,
            segmented: false,
        }),
        KernelId::Rmsnorm { dtype: DType::F16 } => {
            Some(KernelId::RmsnormParts { segmented: false })
        }
        _ => None,
    }
}

/// The split form of a row kernel whose result is `output`: a norm's
/// ([`split_norm`]), or for a softmax stored as FP8 the statistics of
/// equal worker shares and [`KernelId::SoftmaxPartsOnce`], which spares
/// the split rows' workers the whole row's statistics.
pub(crate) fn split_row_kernel(kernel: KernelId, output: DType) -> Option<KernelId> {
    match kernel {
        KernelId::Softmax {
            dtype: DType::F16,
            causal: false,
            exp_once: true,
        } if output.is_fp8() => Some(KernelId::SoftmaxPartsOnce { out: output }),
        _ => split_norm(kernel),
    }
}

/// The f32 values of a split norm's partial statistics per row: six
/// records of four (`device/include/norm.h`).
pub(crate) const NORM_PART_RECORDS_PER_ROW: usize = 24;

/// The bytes of those records: one row's block of a tile's statistics
/// (`ROW_RECORDS` in `device/include/norm.h`).
pub(crate) const NORM_PART_ROW_BYTES: usize = NORM_PART_RECORDS_PER_ROW * 4;

/// The bytes of one record (`PART_RECORD`): a segmented plan's tile holds
/// one per row and segment, and its statistics phase moves them.
pub(crate) const NORM_RECORD_BYTES: usize = NORM_PART_ROW_BYTES / 6;

/// The elementwise operations of two operands with a kernel of their own
/// besides `add` (whose kernel predates them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum BinaryOp {
    Mul,
    Sub,
    Div,
}

impl BinaryOp {
    pub(crate) fn name(self) -> &'static str {
        match self {
            BinaryOp::Mul => "mul",
            BinaryOp::Sub => "sub",
            BinaryOp::Div => "div",
        }
    }
}

/// The elementwise functions of one operand that share `device/unary.S`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum UnaryOp {
    Silu,
    GeluTanh,
}

impl UnaryOp {
    pub(crate) fn name(self) -> &'static str {
        match self {
            UnaryOp::Silu => "silu",
            UnaryOp::GeluTanh => "gelu_tanh",
        }
    }
}

impl KernelId {
    /// Whether the kernel computes each output element from the operands'
    /// elements at the same place alone, reading its operands as dense
    /// `rows * row_length` arrays (`device/include/rows.h`): such a kernel
    /// may run on any contiguous range of elements, not only whole rows
    /// ([`Partition::Elements`]). A fused cast epilogue
    /// ([`cast_epilogue`]) is elementwise too.
    pub(crate) fn is_elementwise(self) -> bool {
        matches!(
            self,
            KernelId::Cast { .. }
                | KernelId::Add { .. }
                | KernelId::Gelu { .. }
                | KernelId::GeluCast { .. }
                | KernelId::Binary { .. }
                | KernelId::Unary { .. }
        )
    }

    /// The state fields the kernel must declare besides its operands:
    /// those its form exists for, which a source predating the form would
    /// not read (a segmented norm's `segments`).
    pub(crate) fn required_fields(self) -> &'static [&'static str] {
        match self {
            KernelId::FoldRecords { .. } => &["segment", "segments"],
            KernelId::ReducePartials {
                reduction: Reduction::Mean,
                ..
            } => &["divisor"],
            KernelId::ReducePartial { .. } => &["parts", "piece"],
            KernelId::LayernormParts {
                segmented: true, ..
            }
            | KernelId::RmsnormParts { segmented: true }
            | KernelId::SoftmaxParts
            | KernelId::SoftmaxMaskedParts { .. } => &["segments"],
            _ => &[],
        }
    }

    /// The GEMM variant for `input` operands in `weights` memory and a
    /// kernel shard of `shard` (swapped already when the product is).
    pub(crate) fn gemm(input: DType, weights: MemoryClass, shard: &Shard) -> KernelId {
        KernelId::Gemm {
            fp8: input.is_fp8(),
            interleaved: weights == MemoryClass::Interleaved,
            k: shard.inner as u32,
            c: shard.cols as u32,
            r: shard.rows as u32,
        }
    }

    /// The GEMM variant of a product whose result is `output`: the f16
    /// (or FP8) output kernel, or for an f32 result the kernel that
    /// carries f32 partials (its inputs are f16, legalization casts FP8).
    pub(crate) fn gemm_for(
        input: DType,
        output: DType,
        weights: MemoryClass,
        shard: &Shard,
    ) -> KernelId {
        if output != DType::F32 {
            return KernelId::gemm(input, weights, shard);
        }
        KernelId::GemmF32Out {
            interleaved: weights == MemoryClass::Interleaved,
            k: shard.inner as u32,
            c: shard.cols as u32,
            r: shard.rows as u32,
        }
    }

    /// The most adds a reduction runs after its sums
    /// ([`KernelId::ReduceAddPlus`]).
    const MAX_ADDENDS: usize = 2;

    /// The kernel summing `slices` partials of a split inner dimension into
    /// a result of `output` whose product's epilogue runs `epilogue`, and
    /// how many of the epilogue's leading runs it carries out itself: with
    /// f16 partials, [`KernelId::ReduceCast`] for an FP8 result whose cast
    /// is the product's only epilogue (`epilogue` is then empty: the cast
    /// is the kernel's store), or its adds of f16 operands, up to two.
    pub(crate) fn reduce_with(
        slices: u32,
        output: DType,
        epilogue: &[EpilogueKernel],
    ) -> (KernelId, usize) {
        let plain = Self::reduce_add_for(output);
        if plain != KernelId::ReduceAdd || slices < 2 {
            return (plain, 0);
        }
        if output.is_fp8() && epilogue.is_empty() {
            return (KernelId::ReduceCast { to: output }, 0);
        }
        let adds = epilogue
            .iter()
            .take(Self::MAX_ADDENDS)
            .take_while(|run| {
                run.kernel == KernelId::Add { dtype: DType::F16 } && run.operand.is_some()
            })
            .count();
        match adds {
            0 => (plain, 0),
            n => (KernelId::ReduceAddPlus { addends: n as u8 }, n),
        }
    }

    /// The kernel summing the partials of a split inner dimension into a
    /// result of `output`.
    pub(crate) fn reduce_add_for(output: DType) -> KernelId {
        match output {
            DType::F32 => KernelId::ReduceAddF32,
            _ => KernelId::ReduceAdd,
        }
    }
}

/// The name suffix of a norm kernel's segmented form.
fn segmented_suffix(segmented: bool) -> &'static str {
    if segmented {
        "_seg"
    } else {
        ""
    }
}

impl Partition {
    /// The segments each row is cut into under [`Partition::Segments`].
    pub(crate) fn segments(row_length: usize, segment: usize) -> usize {
        row_length.div_ceil(segment.max(1))
    }
}

/// The prefix of a kernel with an `add` fused before it.
fn add_prefix(add: bool) -> &'static str {
    if add {
        "add_"
    } else {
        ""
    }
}

/// The family part of a kernel name: `f8` for either FP8 format.
fn family(dtype: DType) -> &'static str {
    if dtype.is_fp8() {
        "f8"
    } else {
        dtype.name()
    }
}

impl fmt::Display for KernelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            KernelId::Gemm {
                fp8,
                interleaved,
                k,
                c,
                r,
            } => write!(
                f,
                "gemm_{}{}_k{k}_c{c}_r{r}",
                if fp8 { "f8" } else { "f16" },
                if interleaved { "_interleaved" } else { "" }
            ),
            KernelId::Cast { from, to } => write!(f, "cast_{}_{}", from.name(), to.name()),
            KernelId::Add { dtype } => write!(f, "add_{}", family(dtype)),
            KernelId::Gelu { dtype, add } => {
                write!(f, "{}gelu_{}", add_prefix(add), family(dtype))
            }
            KernelId::GeluCast { to, add } => {
                write!(f, "{}gelu_f16_{}", add_prefix(add), to.name())
            }
            KernelId::Softmax {
                dtype,
                causal,
                exp_once,
            } => write!(
                f,
                "softmax_{}{}{}",
                family(dtype),
                if exp_once { "_once" } else { "" },
                if causal { "_causal" } else { "" }
            ),
            KernelId::Layernorm { dtype } => write!(f, "layernorm_{}", family(dtype)),
            KernelId::LayernormCast { to } => write!(f, "layernorm_f16_{}", to.name()),
            KernelId::LayernormStats => f.write_str("layernorm_stats_f16"),
            KernelId::LayernormParts { out, segmented } if out.is_fp8() => write!(
                f,
                "layernorm_parts_f16_{}{}",
                out.name(),
                segmented_suffix(segmented)
            ),
            KernelId::LayernormParts { segmented, .. } => {
                write!(f, "layernorm_parts_f16{}", segmented_suffix(segmented))
            }
            KernelId::RmsnormStats => f.write_str("rmsnorm_stats_f16"),
            KernelId::RmsnormParts { segmented } => {
                write!(f, "rmsnorm_parts_f16{}", segmented_suffix(segmented))
            }
            KernelId::SoftmaxStats { exp_once: false } => f.write_str("softmax_stats_f16"),
            KernelId::SoftmaxStats { exp_once: true } => f.write_str("softmax_stats_f16_once"),
            KernelId::SoftmaxPartsOnce { out } => {
                write!(f, "softmax_parts_f16_once_{}", out.name())
            }
            KernelId::FoldRecords { softmax: false } => f.write_str("fold_norm_records"),
            KernelId::FoldRecords { softmax: true } => f.write_str("fold_softmax_records"),
            KernelId::SoftmaxParts => f.write_str("softmax_parts_f16_seg"),
            KernelId::RearrangeBlockMajor { dtype, rows, cols } => {
                write!(f, "rearrange_{}_b{rows}x{cols}", family(dtype))
            }
            KernelId::RearrangeBlocks => f.write_str("rearrange_blocks"),
            KernelId::ReduceAdd => f.write_str("reduce_add_f16"),
            KernelId::ReduceAddPlus { addends } => write!(f, "reduce_add_f16_plus{addends}"),
            KernelId::ReduceCast { to } => write!(f, "reduce_add_f16_{}", to.name()),
            KernelId::Binary { op, dtype } => write!(f, "{}_{}", op.name(), family(dtype)),
            KernelId::Unary { op, dtype } => write!(f, "{}_{}", op.name(), family(dtype)),
            KernelId::Rmsnorm { dtype } => write!(f, "rmsnorm_{}", family(dtype)),
            KernelId::GemmF32Out {
                interleaved,
                k,
                c,
                r,
            } => write!(
                f,
                "gemm_f16_f32out{}_k{k}_c{c}_r{r}",
                if interleaved { "_interleaved" } else { "" }
            ),
            KernelId::ReduceAddF32 => f.write_str("reduce_add_f32"),
            KernelId::SoftmaxMasked { dtype, mask } => {
                write!(f, "softmax_{}_mask_{}", family(dtype), mask.name())
            }
            KernelId::SoftmaxMaskedStats { mask } => {
                write!(f, "softmax_stats_f16_mask_{}", mask.name())
            }
            KernelId::SoftmaxMaskedParts { mask } => {
                write!(f, "softmax_parts_f16_mask_{}_seg", mask.name())
            }
            KernelId::ReduceRows { reduction, dtype } => {
                write!(f, "{}_{}", reduction.op_name(), family(dtype))
            }
            KernelId::ReducePartial { reduction, dtype } => {
                write!(f, "{}_{}_partial", reduction.op_name(), family(dtype))
            }
            KernelId::ReducePartials { reduction, out } => {
                write!(f, "{}_partials_{}", reduction.op_name(), family(out))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Folded, every row is dealt out once, each tile gets two chunks of
    /// half its rows from either end of one matrix, and a causal softmax
    /// keeps as many elements on each tile; unfolded, the rows go in order.
    #[test]
    fn folded_rows_give_each_tile_the_same_causal_work() {
        let (rows, matrix_rows, per_tile) = (3 * 48, 48, 8);
        let causal = KernelId::Softmax {
            dtype: DType::F16,
            causal: true,
            exp_once: false,
        };
        assert!(can_fold(causal, rows, matrix_rows, per_tile));
        let chunks = row_chunks(rows, per_tile, matrix_rows, true);
        let mut seen = vec![0; rows];
        let mut kept = vec![0; rows / per_tile];
        for &(tile, first, count) in &chunks {
            assert_eq!(count, per_tile / 2);
            let matrix = first / matrix_rows;
            assert_eq!(matrix, tile as usize / (matrix_rows / per_tile));
            for (row, n) in seen.iter_mut().enumerate().skip(first).take(count) {
                *n += 1;
                kept[tile as usize] += row % matrix_rows + 1;
            }
        }
        assert!(seen.iter().all(|&n| n == 1), "{seen:?}");
        assert!(kept.iter().all(|&k| k == kept[0]), "{kept:?}");
        assert_eq!(&chunks[..2], &[(0, 0, 4), (0, 44, 4)]);
        assert_eq!(&chunks[10..12], &[(5, 20, 4), (5, 24, 4)]);
        assert_eq!(
            row_chunks(10, 4, 10, false),
            vec![(0, 0, 4), (1, 4, 4), (2, 8, 2)]
        );
        // Odd counts, counts that do not divide the matrix, one tile per
        // matrix, a softmax that is not causal: no fold.
        assert!(!can_fold(causal, rows, matrix_rows, 3));
        assert!(!can_fold(causal, 197 * 6, 197, 2));
        assert!(!can_fold(causal, 96, 48, 48));
        assert!(!can_fold(causal, 100, 48, 8));
        let plain = KernelId::Softmax {
            dtype: DType::F16,
            causal: false,
            exp_once: false,
        };
        assert!(!can_fold(plain, rows, matrix_rows, per_tile));
    }

    #[test]
    fn kernel_names_follow_the_seed_style() {
        let shard = Shard {
            batch: 1,
            rows: 2,
            inner: 32,
            cols: 16,
        };
        let names: Vec<String> = [
            KernelId::gemm(DType::F143, MemoryClass::Interleaved, &shard),
            KernelId::gemm(DType::F16, MemoryClass::Standard, &shard),
            KernelId::Cast {
                from: DType::F16,
                to: DType::F152,
            },
            KernelId::Softmax {
                dtype: DType::F16,
                causal: true,
                exp_once: false,
            },
            KernelId::Softmax {
                dtype: DType::F16,
                causal: false,
                exp_once: true,
            },
            KernelId::RearrangeBlockMajor {
                dtype: DType::F16,
                rows: 16,
                cols: 4,
            },
            KernelId::ReduceAdd,
            KernelId::ReduceAddPlus { addends: 2 },
            KernelId::ReduceCast { to: DType::F143 },
            KernelId::Binary {
                op: BinaryOp::Div,
                dtype: DType::F32,
            },
            KernelId::Unary {
                op: UnaryOp::GeluTanh,
                dtype: DType::F16,
            },
            KernelId::Rmsnorm { dtype: DType::F16 },
            KernelId::SoftmaxMasked {
                dtype: DType::F16,
                mask: DType::F32,
            },
            KernelId::ReduceRows {
                reduction: Reduction::Mean,
                dtype: DType::F32,
            },
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(
            names,
            [
                "gemm_f8_interleaved_k32_c16_r2",
                "gemm_f16_k32_c16_r2",
                "cast_f16_f152",
                "softmax_f16_causal",
                "softmax_f16_once",
                "rearrange_f16_b16x4",
                "reduce_add_f16",
                "reduce_add_f16_plus2",
                "reduce_add_f16_f143",
                "div_f32",
                "gelu_tanh_f16",
                "rmsnorm_f16",
                "softmax_f16_mask_f32",
                "reduce_mean_f32"
            ]
        );
    }

    #[test]
    fn an_epilogue_runs_one_kernel_per_step_an_add_and_gelu_as_one() {
        use EpilogueStep::*;
        let kernels = |steps: &[EpilogueStep], output| -> Vec<(String, Option<usize>)> {
            epilogue_kernels(steps, output)
                .into_iter()
                .map(|run| (run.kernel.to_string(), run.operand))
                .collect()
        };
        let named = |list: &[(&str, Option<usize>)]| -> Vec<(String, Option<usize>)> {
            list.iter().map(|&(n, o)| (n.to_string(), o)).collect()
        };
        assert!(kernels(&[], DType::F143).is_empty());
        assert_eq!(
            kernels(&[Add, Gelu], DType::F143),
            named(&[("add_gelu_f16_f143", Some(0))])
        );
        assert_eq!(
            kernels(&[Add, Add], DType::F16),
            named(&[("add_f16", Some(0)), ("add_f16", Some(1))])
        );
        assert_eq!(
            kernels(&[Silu, Mul, Gelu], DType::F152),
            named(&[
                ("silu_f16", None),
                ("mul_f16", Some(0)),
                ("gelu_f16_f152", None)
            ])
        );
        assert_eq!(
            kernels(&[GeluTanh, Add], DType::F143),
            named(&[
                ("gelu_tanh_f16", None),
                ("add_f16", Some(0)),
                ("cast_f16_f143", None)
            ])
        );
    }

    /// A split product's reduction runs up to two leading adds of its
    /// epilogue, or its cast when that is all; not an add fused with a
    /// GELU, not in f32, not without a split.
    #[test]
    fn a_reduction_takes_the_epilogues_leading_adds() {
        use EpilogueStep::*;
        let reduce = |slices, steps: &[EpilogueStep], output| {
            let (kernel, absorbed) =
                KernelId::reduce_with(slices, output, &epilogue_kernels(steps, output));
            (kernel.to_string(), absorbed)
        };
        let f16 = DType::F16;
        assert_eq!(reduce(4, &[], f16), ("reduce_add_f16".into(), 0));
        assert_eq!(reduce(4, &[Add], f16), ("reduce_add_f16_plus1".into(), 1));
        assert_eq!(
            reduce(2, &[Add, Add, Add], f16),
            ("reduce_add_f16_plus2".into(), 2)
        );
        assert_eq!(
            reduce(2, &[Add, Add], DType::F143),
            ("reduce_add_f16_plus2".into(), 2)
        );
        assert_eq!(
            reduce(12, &[], DType::F143),
            ("reduce_add_f16_f143".into(), 0)
        );
        assert_eq!(
            reduce(4, &[Add], DType::F152),
            ("reduce_add_f16_plus1".into(), 1)
        );
        assert_eq!(reduce(4, &[Mul, Add], f16), ("reduce_add_f16".into(), 0));
        assert_eq!(reduce(4, &[Add, Gelu], f16), ("reduce_add_f16".into(), 0));
        assert_eq!(reduce(4, &[Add], DType::F32), ("reduce_add_f32".into(), 0));
        assert_eq!(reduce(1, &[Add], f16), ("reduce_add_f16".into(), 0));
    }
}
