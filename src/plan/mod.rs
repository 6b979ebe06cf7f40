//! Operator planning: for one operation, enumerate ways to spread it over
//! tiles, estimate each with the analytical cost model and keep a few
//! finalists, best first.
//!
//! The planner is a pure function of an [`OpSignature`] and the target, so
//! the pipeline can memoize it per signature: identical operations share one
//! plan. The planner does not lower anything: the pipeline refines the
//! finalists by lowering the operation alone and scheduling its exchange
//! phases (`pipeline::refine`), and selects among them.

pub(crate) mod cost;
pub(crate) mod gathered;
pub(crate) mod kernel_cost;
pub(crate) mod layouts;
pub(crate) mod matmul;
pub(crate) mod reductions;
pub(crate) mod segments;
pub(crate) mod signature;

use crate::graph::DType;
pub(crate) use crate::partition::Partition;
use crate::partition::{BinaryOp, KernelId, UnaryOp};
use crate::target::Target;
use cost::Estimate;
use serde::{Deserialize, Serialize};
use signature::{OpSignature, SignatureKind};
use std::fmt::Write as _;

/// How many of the best candidates survive to refinement.
pub(crate) const FINALISTS: usize = 4;

/// One costed way to run an operation.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) struct Candidate {
    pub partition: Partition,
    pub tiles_used: u32,
    pub estimate: Estimate,
    /// Figures from lowering and scheduling the operation alone, for
    /// finalists (`pipeline::refine`).
    #[serde(default)]
    pub refined: Option<Refined>,
    /// Whether refinement skipped this finalist because its proven lower
    /// bound could not beat an already refined one (`pipeline::refine`).
    #[serde(default)]
    pub pruned: bool,
}

/// A finalist's figures after physical scheduling.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) struct Refined {
    /// The sum of the scheduled horizons of the operation's phases.
    pub scheduled_exchange_cycles: u64,
    /// The slowest tile's block-major rearranges of operand parts it holds
    /// itself ([`crate::lower::local`]), which the estimate counts as
    /// exchange.
    pub rearrange_cycles: u64,
    /// Compute and sync as estimated, exchange as scheduled, plus the
    /// rearranges.
    pub refined_cycles: u64,
    /// The scheduled gather of the result by an element-wise reader spread
    /// as the planner spreads it: not part of the operation's cycles, but
    /// what its result's layout costs the operations after it, which the
    /// selection weighs too.
    #[serde(default)]
    pub reader_exchange_cycles: u64,
    /// The busiest tile's exchange load (bytes in or out) with the grid
    /// mapping, and the best load a rotation would give.
    pub baseline_pressure: u64,
    pub best_rotation_pressure: u64,
}

/// The planner's answer for one signature.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) struct OperatorPlans {
    /// How many candidates were costed.
    pub candidates: usize,
    /// The best few, best first.
    pub finalists: Vec<Candidate>,
    /// Index into `finalists` of the chosen plan: the first in the
    /// planner's analytical order, until refinement selects.
    pub selected: usize,
}

impl OperatorPlans {
    pub(crate) fn selected(&self) -> &Candidate {
        &self.finalists[self.selected]
    }

    /// Checks that these plans can be plans of `signature`: one is
    /// selected, and each finalist spreads this kind of operation over at
    /// most the signature's tiles, with this operation's rows and kernel.
    /// The planner's own results always pass; a result read back from the
    /// store is checked so that one computed for another operation (or
    /// damaged with a valid checksum) is recomputed rather than lowered.
    pub(crate) fn check_against(&self, signature: &OpSignature) -> Result<(), String> {
        if self.selected >= self.finalists.len() {
            return Err(format!(
                "plan {} is selected among {} finalists",
                self.selected,
                self.finalists.len()
            ));
        }
        let shape = &signature.output.shape;
        for candidate in &self.finalists {
            if candidate.tiles_used > signature.tiles {
                return Err(format!(
                    "a plan uses {} tiles of {}",
                    candidate.tiles_used, signature.tiles
                ));
            }
            let fits = match (&candidate.partition, &signature.kind) {
                (Partition::View, SignatureKind::View) => true,
                (partition @ Partition::Gathered { .. }, SignatureKind::Concat { .. }) => {
                    gathered::partition_fits(signature, partition)
                }
                (partition @ Partition::Matmul { .. }, SignatureKind::Matmul { .. }) => {
                    matmul::partition_fits(signature, partition)
                }
                (partition @ Partition::Segments { .. }, _) => {
                    segments::partition_fits(signature, partition)
                }
                (
                    Partition::Rows {
                        rows,
                        row_length,
                        rows_per_tile,
                        kernel,
                        folded,
                    },
                    kind,
                ) if !matches!(kind, SignatureKind::Matmul { .. } | SignatureKind::View) => {
                    let leading: usize = shape[..shape.len().saturating_sub(1)].iter().product();
                    let matrix_rows = crate::partition::matrix_rows(shape);
                    Some(row_length) == shape.last()
                        && (!folded
                            || crate::partition::can_fold(
                                *kernel,
                                *rows,
                                matrix_rows,
                                *rows_per_tile,
                            ))
                        && *rows == leading
                        && (1..=(*rows).max(1)).contains(rows_per_tile)
                        && rows.div_ceil(*rows_per_tile) <= signature.tiles as usize
                        && row_kernel(signature).is_some_and(|own| {
                            *kernel == own
                                || Some(*kernel)
                                    == crate::partition::split_row_kernel(
                                        own,
                                        signature.output.dtype,
                                    )
                        })
                }
                (
                    Partition::Elements {
                        elements,
                        per_tile,
                        kernel,
                    },
                    kind,
                ) if !matches!(kind, SignatureKind::Matmul { .. } | SignatureKind::View) => {
                    // A range is a whole number of quanta, so one range
                    // may run past the last element.
                    *elements == shape.iter().product::<usize>()
                        && (1..=(*elements).max(1).next_multiple_of(ELEMENT_RANGE_QUANTUM))
                            .contains(per_tile)
                        && elements.div_ceil(*per_tile) <= signature.tiles as usize
                        && kernel.is_elementwise()
                        && Some(*kernel) == row_kernel(signature)
                }
                _ => false,
            };
            if !fits {
                return Err(format!(
                    "plan {:?} does not fit {signature}",
                    candidate.partition
                ));
            }
        }
        Ok(())
    }
}

/// Issues per 4-lane vector of each row-wise kernel's inner loop.
fn issues_per_vector(kind: &SignatureKind) -> u64 {
    match kind {
        SignatureKind::Cast | SignatureKind::Add | SignatureKind::Rearrange { .. } => 2,
        SignatureKind::Softmax { .. } | SignatureKind::Layernorm { .. } => 6,
        SignatureKind::Gelu => 8,
        SignatureKind::Matmul { .. } | SignatureKind::View => 0,
        // The issues of `device/binary.S`, `unary.S` and `rmsnorm_f16.S`
        // per quad of f16 values, as measured by
        // `tests/row_kernels/calibration.rs`; their formulas price them
        // (f32 pairs included), this is only the fallback's figure.
        SignatureKind::Binary { op } => match op {
            BinaryOp::Mul | BinaryOp::Sub => 3,
            BinaryOp::Div => 16,
        },
        SignatureKind::Unary { op } => match op {
            UnaryOp::Silu => 25,
            UnaryOp::GeluTanh => 31,
        },
        SignatureKind::Rmsnorm { .. } => 14,
        SignatureKind::Concat { .. } => 0,
        // One vector per issue (`device/reduce_rows.S`); their formulas
        // price them, this is only the fallback's figure.
        SignatureKind::Reduce { .. } => 1,
    }
}

/// The kernel of a row-wise operation.
pub(crate) fn row_kernel(signature: &OpSignature) -> Option<KernelId> {
    let dtype = signature.inputs[0].dtype;
    Some(match &signature.kind {
        SignatureKind::Cast => KernelId::Cast {
            from: dtype,
            to: signature.output.dtype,
        },
        SignatureKind::Add => KernelId::Add { dtype },
        // A GELU whose result is FP8 has a cast fused into it
        // (`crate::fuse`), which its kernel variant stores in the same pass.
        // A second input is an add fused into the GELU.
        SignatureKind::Gelu => {
            let add = signature.inputs.len() == 2;
            if dtype == DType::F16 && signature.output.dtype.is_fp8() {
                KernelId::GeluCast {
                    to: signature.output.dtype,
                    add,
                }
            } else {
                KernelId::Gelu { dtype, add }
            }
        }
        // A second input is the additive mask.
        SignatureKind::Softmax { .. } if signature.inputs.len() == 2 => KernelId::SoftmaxMasked {
            dtype,
            mask: signature.inputs[1].dtype,
        },
        // A softmax whose result is FP8 has a cast fused into it: its f16
        // result only feeds the cast, whose rounding hides the half ulp
        // that storing the exponentials once costs.
        SignatureKind::Softmax { causal, .. } => KernelId::Softmax {
            dtype,
            causal: *causal,
            exp_once: dtype == DType::F16 && signature.output.dtype.is_fp8(),
        },
        SignatureKind::Layernorm { .. }
            if dtype == DType::F16 && signature.output.dtype.is_fp8() =>
        {
            KernelId::LayernormCast {
                to: signature.output.dtype,
            }
        }
        SignatureKind::Layernorm { .. } => KernelId::Layernorm { dtype },
        SignatureKind::Rearrange { block } => KernelId::RearrangeBlockMajor {
            dtype,
            rows: block[0],
            cols: block[1],
        },
        SignatureKind::Binary { op } => KernelId::Binary { op: *op, dtype },
        SignatureKind::Unary { op } => KernelId::Unary { op: *op, dtype },
        SignatureKind::Rmsnorm { .. } => KernelId::Rmsnorm { dtype },
        SignatureKind::Reduce { reduction } => KernelId::ReduceRows {
            reduction: *reduction,
            dtype,
        },
        SignatureKind::Matmul { .. } | SignatureKind::View => return None,
        SignatureKind::Concat { .. } => return None,
    })
}

/// The busiest tile's cycles when `rows` rows of `row_length` go
/// `rows_per_tile` to a tile (folded or not, [`crate::partition::row_chunks`]),
/// by the kernel's calibrated formula with the parameters lowering gives
/// each run; `None` when the kernel has none. Every full tile costs the
/// same except for a causal softmax, whose rows keep more elements
/// further down their matrix, so that one is evaluated tile by tile.
fn row_tile_cycles(
    signature: &OpSignature,
    kernel: KernelId,
    (rows, row_length): (usize, usize),
    rows_per_tile: usize,
    folded: bool,
) -> Option<u64> {
    let shape = &signature.output.shape;
    let matrix_rows = crate::partition::matrix_rows(shape);
    let run = |first_row: usize, count: usize| {
        let params = [
            ("rows", count as i64),
            ("row_length", row_length as i64),
            ("first_row", first_row as i64),
            ("matrix_rows", matrix_rows as i64),
        ];
        cost::kernel_cycles(kernel, &params)
    };
    let rows_per_tile = rows_per_tile.max(1);
    if folded || matches!(kernel, KernelId::Softmax { causal: true, .. }) {
        // Each tile's runs one after the other, the busiest tile's total.
        let mut tiles: Vec<u64> = Vec::new();
        for (tile, first, count) in
            crate::partition::row_chunks(rows.max(1), rows_per_tile, matrix_rows, folded)
        {
            let tile = tile as usize;
            if tiles.len() <= tile {
                tiles.resize(tile + 1, 0);
            }
            tiles[tile] += run(first, count)?;
        }
        tiles.into_iter().max()
    } else {
        let last = (rows.max(1) - 1) / rows_per_tile * rows_per_tile;
        let count = |first: usize| rows_per_tile.min(rows.max(1) - first);
        Some(run(0, count(0))?.max(run(last, count(last))?))
    }
}

fn row_candidates(signature: &OpSignature, target: &Target) -> Vec<Candidate> {
    let Some(kernel) = row_kernel(signature) else {
        return Vec::new();
    };
    let shape = &signature.output.shape;
    let row_length = shape.last().copied().unwrap_or(1);
    let rows: usize = shape[..shape.len().saturating_sub(1)].iter().product();
    // A reduction's kernel walks its input's rows; its output rows are one
    // value long.
    let input_length = match signature.kind {
        SignatureKind::Reduce { .. } => signature.inputs[0].shape.last().copied().unwrap_or(1),
        _ => row_length,
    };
    // A fused operation's cast runs after the kernel on each tile, from
    // f16 rows the tile keeps next to the result (`crate::fuse`).
    let epilogue = crate::partition::cast_epilogue(kernel, signature.output.dtype);
    let element_bytes = share_element_bytes(signature, epilogue);
    let mut found = Vec::new();
    let matrix_rows = crate::partition::matrix_rows(shape);
    let mut tiles = signature.tiles.min(rows.max(1) as u32);
    while tiles >= 1 {
        let rows_per_tile = rows.div_ceil(tiles as usize);
        let used = rows.div_ceil(rows_per_tile.max(1)) as u32;
        let elements = (rows_per_tile * input_length) as u64;
        let lengths = (rows, input_length);
        // A causal softmax's rows may also go folded, each tile keeping as
        // many elements as the next.
        let folds = match crate::partition::can_fold(kernel, rows, matrix_rows, rows_per_tile) {
            true => &[false, true][..],
            false => &[false],
        };
        for &folded in folds {
            let compute = row_tile_cycles(signature, kernel, lengths, rows_per_tile, folded)
                .unwrap_or_else(|| {
                    cost::vector_tile_cycles(
                        target,
                        issues_per_vector(&signature.kind),
                        signature.output.dtype,
                        elements,
                    )
                })
                + epilogue
                    .and_then(|cast| {
                        row_tile_cycles(signature, cast, lengths, rows_per_tile, folded)
                    })
                    .unwrap_or(0);
            found.push(share_candidate(
                target,
                Partition::Rows {
                    rows,
                    row_length,
                    rows_per_tile,
                    kernel,
                    folded,
                },
                used,
                compute,
                received_bytes(signature, elements, row_length),
                elements * element_bytes,
            ));
        }
        // The split form of a norm, or of a softmax stored as FP8 (whose
        // exponentials take the place of the fused cast's f16 values),
        // costed as its two kernels; the ranking keeps it where it beats
        // the whole-row kernel.
        if let Some(split) = crate::partition::split_row_kernel(kernel, signature.output.dtype) {
            let tile_cycles = |k| row_tile_cycles(signature, k, lengths, rows_per_tile, false);
            let stats = crate::partition::norm_prologue(split).and_then(tile_cycles);
            if let (Some(stats), Some(parts)) = (stats, tile_cycles(split)) {
                let records = rows_per_tile * crate::partition::NORM_PART_RECORDS_PER_ROW;
                found.push(share_candidate(
                    target,
                    Partition::Rows {
                        rows,
                        row_length,
                        rows_per_tile,
                        kernel: split,
                        folded: false,
                    },
                    used,
                    stats + parts,
                    received_bytes(signature, elements, row_length),
                    elements * element_bytes + (records * DType::F32.size_bytes()) as u64,
                ));
            }
        }
        tiles /= 2;
    }
    if kernel.is_elementwise() {
        found.extend(element_candidates(signature, target, kernel));
    }
    found
}

/// The elements of a [`Partition::Elements`] range are a multiple of this,
/// so that every range starts where a kernel's vector unit does (eight FP8
/// values, two f16 quads, four f32 pairs) and exchange moves whole words.
pub(crate) const ELEMENT_RANGE_QUANTUM: usize = 8;

/// Candidates cutting an elementwise operation's elements into ranges,
/// whatever its rows ([`Partition::Elements`]), on as many tiles as the
/// operation has ranges of [`ELEMENT_RANGE_QUANTUM`] elements and on
/// halvings of that, but not where the ranges would be whole rows (the
/// row candidates' pieces). They are costed like [`row_candidates`]: the
/// busiest tile's kernel (and fused cast) by the kernel's formula, the
/// exchange of every operand computed on the device ([`received_bytes`]),
/// one phase. Tiles beyond a tensor's rows only help an operation whose
/// compute outweighs the extra sync and the exchange, so the ranking, not
/// this list, decides.
fn element_candidates(
    signature: &OpSignature,
    target: &Target,
    kernel: KernelId,
) -> Vec<Candidate> {
    let elements: usize = signature.output.shape.iter().product();
    let row_length = signature.output.shape.last().copied().unwrap_or(1);
    let epilogue = crate::partition::cast_epilogue(kernel, signature.output.dtype);
    let element_bytes = share_element_bytes(signature, epilogue);
    let mut found = Vec::new();
    let ranges = elements.div_ceil(ELEMENT_RANGE_QUANTUM).max(1);
    let mut tiles = signature.tiles.min(ranges as u32);
    while tiles >= 1 {
        let per_tile = elements
            .div_ceil(tiles as usize)
            .next_multiple_of(ELEMENT_RANGE_QUANTUM)
            .max(1);
        let used = elements.div_ceil(per_tile) as u32;
        let count = per_tile.min(elements) as u64;
        let tile_cycles =
            |kernel| row_tile_cycles(signature, kernel, (elements, 1), per_tile, false);
        let compute = tile_cycles(kernel).unwrap_or_else(|| {
            cost::vector_tile_cycles(
                target,
                issues_per_vector(&signature.kind),
                signature.output.dtype,
                count,
            )
        }) + epilogue.and_then(tile_cycles).unwrap_or(0);
        // Ranges of whole rows are the row candidates' pieces already.
        let whole_rows = per_tile.is_multiple_of(row_length);
        tiles /= 2;
        if whole_rows {
            continue;
        }
        found.push(share_candidate(
            target,
            Partition::Elements {
                elements,
                per_tile,
                kernel,
            },
            used,
            compute,
            received_bytes(signature, count, 1),
            count * element_bytes,
        ));
    }
    found
}

/// The bytes a tile holds for each element of its share: the result,
/// every operand `lower` lays out at the share's shape (a broadcast one
/// too, and a masked softmax's mask; not a norm's row parameters) and a
/// fused cast's f16 values.
fn share_element_bytes(signature: &OpSignature, epilogue: Option<KernelId>) -> u64 {
    let bytes = signature.output.dtype.size_bytes()
        + shared_operands(signature)
            .map(|(_, operand)| operand.dtype.size_bytes())
            .sum::<usize>()
        + epilogue.map_or(0, |_| DType::F16.size_bytes());
    bytes as u64
}

/// A candidate that gives each tile a share of the rows or elements: its
/// busiest tile computes `compute` cycles, receives `received` bytes and
/// holds `held` bytes. Operands that are all weights or streamed need no
/// exchange phase, so no sync either.
fn share_candidate(
    target: &Target,
    partition: Partition,
    tiles_used: u32,
    compute: u64,
    received: u64,
    held: u64,
) -> Candidate {
    let phases = u32::from(received > 0);
    Candidate {
        partition,
        tiles_used,
        estimate: Estimate {
            compute_cycles: compute,
            exchange_cycles: cost::exchange_cycles(target, received),
            sync_cycles: cost::sync_cycles(target, phases),
            exchange_phases: phases,
            peak_standard_bytes: held,
            peak_interleaved_bytes: 0,
            // Row-wise weights (biases, layernorm parameters) are one row
            // long; they are not what fills tile memory.
            resident_weight_bytes: 0,
            resident_weight_data_bytes: 0,
        },
        refined: None,
        pruned: false,
    }
}

/// Whether the operation's operands after the first are one-row
/// parameters (a norm's scale and bias), which `lower` places whole on
/// every tile rather than at the share's shape.
fn has_row_parameters(signature: &OpSignature) -> bool {
    matches!(
        signature.kind,
        SignatureKind::Layernorm { .. } | SignatureKind::Rmsnorm { .. }
    )
}

/// The operands `lower` materialises at the shape of a tile's share of the
/// output (broadcast to it where they are smaller), with their positions:
/// all but a norm's row parameters.
fn shared_operands(
    signature: &OpSignature,
) -> impl Iterator<Item = (usize, &crate::plan::signature::Operand)> {
    let row_parameters = has_row_parameters(signature);
    signature
        .inputs
        .iter()
        .enumerate()
        .filter(move |&(i, _)| i == 0 || !row_parameters)
}

/// The bytes the busiest tile receives over exchange for a share of
/// `elements` operand elements, with rows `row_length` long.
///
/// Every operand computed on the device is gathered: a residual add's or a
/// `sub(x, mean)`'s second operand as well as the first. One broadcast to
/// the share's shape (a `[rows, 1]` reduction result, a bias row) is
/// copied to every element it fills, element by element or row by row, so
/// the tile receives the whole share of it, not only its distinct
/// elements. A norm's row parameters, when computed on the device, bring
/// one row. Weights are laid out where they are used and a streamed input
/// is written by the host where it is used, so neither is exchanged. The
/// planner does not know the producer, so an operand the tile might
/// already hold in place is counted as received.
fn received_bytes(signature: &OpSignature, elements: u64, row_length: usize) -> u64 {
    let shared: u64 = shared_operands(signature)
        .filter(|(_, operand)| !operand.weight && !operand.host)
        .map(|(_, operand)| elements * operand.dtype.size_bytes() as u64)
        .sum();
    let row_parameters: u64 = match has_row_parameters(signature) {
        true => signature.inputs[1..]
            .iter()
            .filter(|operand| !operand.weight && !operand.host)
            .map(|operand| (row_length * operand.dtype.size_bytes()) as u64)
            .sum(),
        false => 0,
    };
    shared + row_parameters
}

/// Whether a candidate's memory fits one tile, leaving `code_reserve` bytes
/// of region 0 for code, exchange tables and the runtime, within the
/// signature's spread level (each level past [`REPLICATION_LEVELS`] halves
/// what a tile may hold).
fn fits_memory(
    target: &Target,
    signature: &OpSignature,
    candidate: &Candidate,
    code_reserve: u64,
) -> bool {
    // Standard buffers go in region 0 first and overflow into region 1, so
    // the bound on them is the whole loadable memory less the code reserve.
    let memory = &target.memory;
    let shift = signature.memory_halvings();
    let region1 = memory.region1_loadable_bytes() >> shift;
    let total =
        u64::from(memory.loadable.end - memory.tile.start).saturating_sub(code_reserve) >> shift;
    candidate.estimate.peak_interleaved_bytes <= region1
        && candidate.estimate.peak_total_bytes() <= total
}

/// Whether a candidate fits one tile and keeps its resident weights within
/// the operation's budget ([`weight_budget`]).
fn fits(
    target: &Target,
    signature: &OpSignature,
    candidate: &Candidate,
    code_reserve: u64,
) -> bool {
    candidate.estimate.resident_weight_data_bytes <= weight_budget(signature)
        && fits_memory(target, signature, candidate, code_reserve)
}

/// How many copies of its weights, on average over the tiles, an operation
/// may keep resident at spread level 0. Weights stay resident for the whole
/// program (one instance per repeat iteration), so replicating them to save
/// exchange must stay bounded or the tiles fill up with copies: when they
/// do, the pipeline raises the spread level of the operations owning the
/// overfull tiles (`pipeline::fit`), and each of the first
/// [`REPLICATION_LEVELS`] levels halves this limit before any level halves
/// the tile memory a plan may use.
pub(crate) const WEIGHT_REPLICATION_LIMIT: u64 = 8;

/// Spread levels that trade replicated weights for exchange (8, 4, 2, then 1
/// copies) before later levels trade tile memory for more tiles.
pub(crate) const REPLICATION_LEVELS: u8 = 3;

/// Resident weight bytes per tile any operation may keep, however small
/// its weights: below this, replication costs less memory than a kernel's
/// code, and limiting it would only trade cycles for nothing.
pub(crate) const WEIGHT_BUDGET_FLOOR_BYTES: u64 = 4096;

/// Bytes of weights per tile an operation may keep resident, counted
/// without the padding of their layout
/// ([`Estimate::resident_weight_data_bytes`]): the budget bounds copies,
/// and padding is no copy. It depends on the operation's own signature
/// only, so editing one operation never changes another's plan.
pub(crate) fn weight_budget(signature: &OpSignature) -> u64 {
    let weights: u64 = signature
        .inputs
        .iter()
        .filter(|o| o.weight)
        .map(|o| (o.shape.iter().product::<usize>() * o.dtype.size_bytes()) as u64)
        .sum();
    let copies = WEIGHT_REPLICATION_LIMIT >> signature.replication_halvings();
    (copies * weights.div_ceil(u64::from(signature.tiles.max(1)))).max(WEIGHT_BUDGET_FLOOR_BYTES)
}

/// Bytes of region 0 the planner leaves for code and runtime tables.
pub(crate) const CODE_RESERVE_BYTES: u64 = 32 * 1024;

/// Plans one operation, in three tiers:
///
/// 1. candidates that fit tile memory and the weight budget, ranked by
///    total cycles, then tiles used, then peak memory;
/// 2. when none does, candidates that fit tile memory but replicate more
///    weight than the budget (an inner dimension that splits badly leaves
///    no other way), ranked by resident weight (without padding), then
///    cycles;
/// 3. when nothing fits at all, the smallest peak (resident weights counted
///    twice, as they stay for the whole program; between equal peaks the
///    one less over region 1), so placement either
///    succeeds with what the other operations leave free or reports the
///    real shortfall.
pub(crate) fn finalists(signature: &OpSignature, target: &Target) -> OperatorPlans {
    let mut all = match signature.kind {
        SignatureKind::Matmul { .. } => matmul::candidates(signature, target),
        SignatureKind::View => vec![Candidate {
            partition: Partition::View,
            tiles_used: 0,
            estimate: Estimate::default(),
            refined: None,
            pruned: false,
        }],
        SignatureKind::Concat { .. } => gathered::candidates(signature, target),
        _ => {
            let mut found = row_candidates(signature, target);
            found.extend(segments::candidates(signature, target));
            found
        }
    };
    let candidates = all.len();
    let (mut fitting, rest): (Vec<_>, Vec<_>) = all
        .drain(..)
        .partition(|c| fits(target, signature, c, CODE_RESERVE_BYTES));
    if !fitting.is_empty() {
        fitting.sort_by_key(|c| {
            (
                c.estimate.total_cycles(),
                c.tiles_used,
                c.estimate.peak_total_bytes(),
            )
        });
    } else {
        let (mut in_memory, mut rest): (Vec<_>, Vec<_>) = rest
            .into_iter()
            .partition(|c| fits_memory(target, signature, c, CODE_RESERVE_BYTES));
        if !in_memory.is_empty() {
            in_memory.sort_by_key(|c| {
                (
                    c.estimate.resident_weight_data_bytes,
                    c.estimate.total_cycles(),
                    c.estimate.peak_total_bytes(),
                )
            });
            fitting = in_memory;
        } else {
            // Peaks include the resident weights, which count twice: they
            // hold their bytes for the whole program, beside every other
            // operation's peak, where the rest is freed after this one.
            // Between equal peaks, the one less over region 1 (the same
            // grid with its buffers in standard memory, which may use the
            // whole tile) before the faster.
            let region1 = target.memory.region1_loadable_bytes() >> signature.memory_halvings();
            rest.sort_by_key(|c| {
                (
                    c.estimate.peak_total_bytes() + c.estimate.resident_weight_bytes,
                    c.estimate.peak_interleaved_bytes.saturating_sub(region1),
                    c.estimate.resident_weight_bytes,
                    c.estimate.total_cycles(),
                )
            });
            fitting = rest;
        }
    }
    tracing::debug!(
        candidates,
        ranked = fitting.len(),
        retained = fitting.len().min(FINALISTS),
        active_tile_count = signature.tiles,
        "costed operator-plan candidates"
    );
    fitting.truncate(FINALISTS);
    for (finalist, c) in fitting.iter().enumerate() {
        tracing::debug!(
            finalist,
            estimated_cycles = c.estimate.total_cycles(),
            estimated_exchange_cycles = c.estimate.exchange_cycles,
            peak_standard_bytes = c.estimate.peak_standard_bytes,
            peak_interleaved_bytes = c.estimate.peak_interleaved_bytes,
            peak_total_bytes = c.estimate.peak_total_bytes(),
            active_tile_count = c.tiles_used,
            "retained operator-plan finalist"
        );
    }
    OperatorPlans {
        candidates,
        finalists: fitting,
        selected: 0,
    }
}

/// The stable text dump of a plan set (used by tests and `--emit plan`).
pub(crate) fn dump(signature: &OpSignature, plans: &OperatorPlans) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{signature}");
    let _ = writeln!(out, "  candidates {}", plans.candidates);
    for (i, c) in plans.finalists.iter().enumerate() {
        let mark = if i == plans.selected { '*' } else { ' ' };
        let e = &c.estimate;
        let _ = writeln!(
            out,
            " {mark}finalist {i}: {} tiles={} cycles={} (compute {} exchange {} sync {}) phases={} peak_standard={} peak_interleaved={}{}{}",
            describe(&c.partition),
            c.tiles_used,
            e.total_cycles(),
            e.compute_cycles,
            e.exchange_cycles,
            e.sync_cycles,
            e.exchange_phases,
            e.peak_standard_bytes,
            e.peak_interleaved_bytes,
            if c.pruned {
                " pruned".to_string()
            } else {
                String::new()
            },
            c.refined.map_or(String::new(), |r| format!(
                " refined={} (scheduled exchange {}{}, read {}, pressure {} rotated {})",
                r.refined_cycles,
                r.scheduled_exchange_cycles,
                match r.rearrange_cycles {
                    0 => String::new(),
                    cycles => format!(", rearrange {cycles}"),
                },
                r.reader_exchange_cycles,
                r.baseline_pressure,
                r.best_rotation_pressure
            )),
        );
    }
    out
}

/// A partition in one line: grid or rows, kernel, memory class.
pub(crate) fn describe(partition: &Partition) -> String {
    match partition {
        Partition::Matmul {
            grid,
            shard,
            weights,
            swapped,
            kernel,
        } => format!(
            "grid b{}xm{}xn{}xk{} shard {}x{}x{}x{} weights {:?}{} kernel {kernel}",
            grid.batch,
            grid.rows,
            grid.cols,
            grid.inner,
            shard.batch,
            shard.rows,
            shard.inner,
            shard.cols,
            weights,
            if *swapped { " swapped" } else { "" },
        )
        .to_lowercase(),
        Partition::Rows {
            rows,
            row_length,
            rows_per_tile,
            kernel,
            folded,
        } => {
            let folded = if *folded { " folded" } else { "" };
            format!("rows {rows}x{row_length} per-tile {rows_per_tile}{folded} kernel {kernel}")
        }
        Partition::Elements {
            elements,
            per_tile,
            kernel,
        } => format!("elements {elements} per-tile {per_tile} kernel {kernel}"),
        Partition::Segments {
            rows,
            row_length,
            rows_per_tile,
            segment,
            kernel,
        } => format!(
            "rows {rows}x{row_length} per-tile {rows_per_tile} segment {segment} kernel {kernel}"
        ),
        Partition::View => "view".to_string(),
        Partition::Gathered {
            rows,
            row_length,
            rows_per_tile,
        } => format!("rows {rows}x{row_length} per-tile {rows_per_tile} gathered (no kernel)"),
    }
}

#[cfg(test)]
mod tests {
    use super::signature::Operand;
    use super::*;
    use crate::graph::DType;
    use crate::target::IPU21;
    use expect_test::expect;

    fn operand(shape: &[usize], dtype: DType, weight: bool) -> Operand {
        Operand {
            shape: shape.to_vec(),
            dtype,
            scale: if dtype.is_fp8() { -3 } else { 0 },
            weight,
            host: false,
        }
    }

    fn check(signature: OpSignature, expected: expect_test::Expect) {
        let plans = finalists(&signature, &IPU21);
        expected.assert_eq(&dump(&signature, &plans));
    }

    #[test]
    fn fp8_gemm_on_64_tiles() {
        check(
            OpSignature {
                kind: SignatureKind::Matmul {
                    transpose_rhs: false,
                    epilogue: Vec::new(),
                },
                inputs: vec![
                    operand(&[128, 512], DType::F143, false),
                    operand(&[512, 64], DType::F143, true),
                ],
                output: operand(&[128, 64], DType::F16, false),
                tiles: 64,
                target: crate::target::TargetId::Ipu21,
                unread: false,
                spread: 0,
            },
            expect![[r#"
                matmul(f143[128, 512]*2^-3, f143[512, 64]*2^-3) -> f16[128, 64] on 64 tiles
                  candidates 740
                 *finalist 0: grid b1xm8xn1xk8 shard 1x16x64x64 weights interleaved kernel gemm_f8_interleaved_k64_c64_r16 tiles=64 cycles=4466 (compute 2562 exchange 704 sync 1200) phases=2 peak_standard=0 peak_interleaved=9472
                  finalist 1: grid b1xm4xn2xk8 shard 1x32x64x32 weights interleaved kernel gemm_f8_interleaved_k64_c32_r32 tiles=64 cycles=4482 (compute 2322 exchange 960 sync 1200) phases=2 peak_standard=0 peak_interleaved=8448
                  finalist 2: grid b1xm8xn2xk4 shard 1x16x128x32 weights interleaved kernel gemm_f8_interleaved_k128_c32_r16 tiles=64 cycles=4562 (compute 2658 exchange 704 sync 1200) phases=2 peak_standard=0 peak_interleaved=8448
                  finalist 3: grid b1xm5xn2xk6 shard 1x26x96x32 weights interleaved kernel gemm_f8_interleaved_k96_c32_r26 tiles=60 cycles=4870 (compute 2646 exchange 1024 sync 1200) phases=2 peak_standard=0 peak_interleaved=9472
            "#]],
        );
    }

    /// A causal softmax of f16 `shape` on 64 tiles.
    fn causal_softmax(shape: &[usize]) -> OpSignature {
        OpSignature {
            kind: SignatureKind::Softmax {
                scale_bits: 0.125f32.to_bits(),
                causal: true,
            },
            inputs: vec![operand(shape, DType::F16, false)],
            output: operand(shape, DType::F16, false),
            tiles: 64,
            target: crate::target::TargetId::Ipu21,
            unread: false,
            spread: 0,
        }
    }

    #[test]
    fn softmax_rows() {
        check(
            causal_softmax(&[6, 197, 197]),
            expect![[r#"
                softmax(f16[6, 197, 197]) -> f16[6, 197, 197] on 64 tiles
                  candidates 7
                 *finalist 0: rows 1182x197 per-tile 19 kernel softmax_f16_causal tiles=63 cycles=42478 (compute 40006 exchange 1872 sync 600) phases=1 peak_standard=14972 peak_interleaved=0
                  finalist 1: rows 1182x197 per-tile 37 kernel softmax_f16_causal tiles=32 cycles=72987 (compute 68742 exchange 3645 sync 600) phases=1 peak_standard=29156 peak_interleaved=0
                  finalist 2: rows 1182x197 per-tile 74 kernel softmax_f16_causal tiles=16 cycles=129062 (compute 121173 exchange 7289 sync 600) phases=1 peak_standard=58312 peak_interleaved=0
                  finalist 3: rows 1182x197 per-tile 148 kernel softmax_f16_causal tiles=8 cycles=205534 (compute 190356 exchange 14578 sync 600) phases=1 peak_standard=116624 peak_interleaved=0
            "#]],
        );
    }

    /// Causal attention's softmax over eight 128-row matrices on 64 tiles:
    /// sixteen rows a tile in order leave the tile with a matrix's last
    /// rows (each keeping up to 128 elements) with almost twice the mean
    /// work; folded, each tile takes eight rows from either end of its
    /// matrix and keeps the mean. Only even counts that divide the matrix
    /// fold (the 197-row matrices above never do).
    #[test]
    fn a_causal_softmax_deals_its_rows_out_folded() {
        check(
            causal_softmax(&[8, 128, 128]),
            expect![[r#"
                softmax(f16[8, 128, 128]) -> f16[8, 128, 128] on 64 tiles
                  candidates 10
                 *finalist 0: rows 1024x128 per-tile 16 folded kernel softmax_f16_causal tiles=64 cycles=18845 (compute 17221 exchange 1024 sync 600) phases=1 peak_standard=8192 peak_interleaved=0
                  finalist 1: rows 1024x128 per-tile 16 kernel softmax_f16_causal tiles=64 cycles=23893 (compute 22269 exchange 1024 sync 600) phases=1 peak_standard=8192 peak_interleaved=0
                  finalist 2: rows 1024x128 per-tile 32 folded kernel softmax_f16_causal tiles=32 cycles=29546 (compute 26898 exchange 2048 sync 600) phases=1 peak_standard=16384 peak_interleaved=0
                  finalist 3: rows 1024x128 per-tile 32 kernel softmax_f16_causal tiles=32 cycles=42959 (compute 40311 exchange 2048 sync 600) phases=1 peak_standard=16384 peak_interleaved=0
            "#]],
        );
    }

    /// A ViT-B MLP's GELU (with its cast to FP8 fused) has 197 rows for
    /// 1472 tiles: cut into ranges of elements it runs on 1455 tiles, and
    /// the whole-row plan on 197 tiles ranks last.
    #[test]
    fn an_elementwise_op_with_fewer_rows_than_tiles_spreads_its_elements() {
        check(
            OpSignature {
                kind: SignatureKind::Gelu,
                inputs: vec![operand(&[197, 3072], DType::F16, false)],
                output: operand(&[197, 3072], DType::F143, false),
                tiles: 1472,
                target: crate::target::TargetId::Ipu21,
                unread: false,
                spread: 0,
            },
            expect![[r#"
                gelu(f16[197, 3072]) -> f143[197, 3072]*2^-3 on 1472 tiles
                  candidates 18
                 *finalist 0: elements 605184 per-tile 416 kernel gelu_f16_f143 tiles=1455 cycles=2038 (compute 1230 exchange 208 sync 600) phases=1 peak_standard=1248 peak_interleaved=0
                  finalist 1: elements 605184 per-tile 824 kernel gelu_f16_f143 tiles=735 cycles=3160 (compute 2148 exchange 412 sync 600) phases=1 peak_standard=2472 peak_interleaved=0
                  finalist 2: elements 605184 per-tile 1648 kernel gelu_f16_f143 tiles=368 cycles=5408 (compute 3984 exchange 824 sync 600) phases=1 peak_standard=4944 peak_interleaved=0
                  finalist 3: rows 197x3072 per-tile 1 kernel gelu_f16_f143 tiles=197 cycles=9306 (compute 7170 exchange 1536 sync 600) phases=1 peak_standard=9216 peak_interleaved=0
            "#]],
        );
    }

    /// ViT-B's layernorm on the whole chip: its 197 rows cut into seven
    /// segments each, on 1379 tiles, beat one row per tile (where the split
    /// form, statistics then each worker writing a sixth of the row, beats
    /// the whole-row kernel); with six rows per tile on 64 tiles, the
    /// whole-row kernel wins.
    #[test]
    fn a_layernorm_with_few_rows_per_tile_splits_its_statistics() {
        let layernorm = |rows, tiles| OpSignature {
            kind: SignatureKind::Layernorm {
                epsilon_bits: 1e-6f32.to_bits(),
            },
            inputs: vec![
                operand(&[rows, 768], DType::F16, false),
                operand(&[768], DType::F16, true),
                operand(&[768], DType::F16, true),
            ],
            output: operand(&[rows, 768], DType::F143, false),
            tiles,
            target: crate::target::TargetId::Ipu21,
            unread: false,
            spread: 0,
        };
        check(
            layernorm(197, 1472),
            expect![[r#"
                layernorm(f16[197, 768], f16[768], f16[768]) -> f143[197, 768]*2^-3 on 1472 tiles
                  candidates 73
                 *finalist 0: rows 197x768 per-tile 1 segment 112 kernel layernorm_parts_f16_f143_seg tiles=1379 cycles=4202 (compute 2922 exchange 80 sync 1200) phases=2 peak_standard=544 peak_interleaved=0
                  finalist 1: rows 197x768 per-tile 1 segment 256 kernel layernorm_parts_f16_f143_seg tiles=591 cycles=4822 (compute 3486 exchange 136 sync 1200) phases=2 peak_standard=912 peak_interleaved=0
                  finalist 2: rows 197x768 per-tile 2 segment 112 kernel layernorm_parts_f16_f143_seg tiles=693 cycles=6340 (compute 4980 exchange 160 sync 1200) phases=2 peak_standard=1088 peak_interleaved=0
                  finalist 3: rows 197x768 per-tile 2 segment 56 kernel layernorm_parts_f16_f143_seg tiles=1386 cycles=6574 (compute 5214 exchange 160 sync 1200) phases=2 peak_standard=976 peak_interleaved=0
            "#]],
        );
        check(
            layernorm(384, 64),
            expect![[r#"
                layernorm(f16[384, 768], f16[768], f16[768]) -> f143[384, 768]*2^-3 on 64 tiles
                  candidates 42
                 *finalist 0: rows 384x768 per-tile 6 kernel layernorm_f16_f143 tiles=64 cycles=30020 (compute 27116 exchange 2304 sync 600) phases=1 peak_standard=13824 peak_interleaved=0
                  finalist 1: rows 384x768 per-tile 6 kernel layernorm_parts_f16_f143 tiles=64 cycles=30912 (compute 28008 exchange 2304 sync 600) phases=1 peak_standard=14400 peak_interleaved=0
                  finalist 2: rows 384x768 per-tile 8 segment 768 kernel layernorm_parts_f16_f143_seg tiles=48 cycles=42324 (compute 38652 exchange 3072 sync 600) phases=1 peak_standard=19328 peak_interleaved=0
                  finalist 3: rows 384x768 per-tile 32 segment 156 kernel layernorm_parts_f16_f143_seg tiles=60 cycles=43724 (compute 39516 exchange 3008 sync 1200) phases=2 peak_standard=20608 peak_interleaved=0
            "#]],
        );
    }

    /// A tile with fewer long rows than workers: the row kernel gives a
    /// split row's every part the whole row's statistics, a one-segment
    /// plan deals them out in equal shares and exchanges no records.
    #[test]
    fn long_rows_fewer_than_the_workers_take_one_segment() {
        let softmax = |rows, tiles| OpSignature {
            kind: SignatureKind::Softmax {
                scale_bits: 1f32.to_bits(),
                causal: false,
            },
            inputs: vec![operand(&[rows, 6000], DType::F16, false)],
            output: operand(&[rows, 6000], DType::F16, false),
            tiles,
            target: crate::target::TargetId::Ipu21,
            unread: false,
            spread: 0,
        };
        check(
            softmax(1, 1),
            expect![[r#"
                softmax(f16[1, 6000]) -> f16[1, 6000] on 1 tiles
                  candidates 2
                 *finalist 0: rows 1x6000 per-tile 1 segment 6000 kernel softmax_parts_f16_seg tiles=1 cycles=56271 (compute 52671 exchange 3000 sync 600) phases=1 peak_standard=24112 peak_interleaved=0
                  finalist 1: rows 1x6000 per-tile 1 kernel softmax_f16 tiles=1 cycles=175550 (compute 171950 exchange 3000 sync 600) phases=1 peak_standard=24000 peak_interleaved=0
            "#]],
        );
        check(
            softmax(3, 1),
            expect![[r#"
                softmax(f16[3, 6000]) -> f16[3, 6000] on 1 tiles
                  candidates 2
                 *finalist 0: rows 3x6000 per-tile 3 segment 6000 kernel softmax_parts_f16_seg tiles=1 cycles=164523 (compute 154923 exchange 9000 sync 600) phases=1 peak_standard=72336 peak_interleaved=0
                  finalist 1: rows 3x6000 per-tile 3 kernel softmax_f16 tiles=1 cycles=235550 (compute 225950 exchange 9000 sync 600) phases=1 peak_standard=72000 peak_interleaved=0
            "#]],
        );
    }

    /// Ranges of elements are plans of elementwise kernels only: a
    /// layernorm needs its rows whole, so such a plan read back for it is
    /// refused.
    #[test]
    fn a_range_of_elements_is_no_plan_for_a_row_reduction() {
        let signature = |kind| OpSignature {
            kind,
            inputs: vec![
                operand(&[4, 64], DType::F16, false),
                operand(&[64], DType::F16, true),
                operand(&[64], DType::F16, true),
            ],
            output: operand(&[4, 64], DType::F16, false),
            tiles: 16,
            target: crate::target::TargetId::Ipu21,
            unread: false,
            spread: 0,
        };
        let layernorm = signature(SignatureKind::Layernorm {
            epsilon_bits: 1e-5f32.to_bits(),
        });
        let plans = finalists(&layernorm, &IPU21);
        assert!(plans.finalists.iter().all(|c| matches!(
            c.partition,
            Partition::Rows { .. } | Partition::Segments { .. }
        )));
        let forged = OperatorPlans {
            candidates: 1,
            finalists: vec![Candidate {
                partition: Partition::Elements {
                    elements: 256,
                    per_tile: 16,
                    kernel: KernelId::Layernorm { dtype: DType::F16 },
                },
                ..plans.finalists[0].clone()
            }],
            selected: 0,
        };
        assert!(forged.check_against(&layernorm).is_err());
        let add = signature(SignatureKind::Add);
        let ranges = OperatorPlans {
            candidates: 1,
            finalists: vec![Candidate {
                partition: Partition::Elements {
                    elements: 256,
                    per_tile: 16,
                    kernel: KernelId::Add { dtype: DType::F16 },
                },
                ..plans.finalists[0].clone()
            }],
            selected: 0,
        };
        assert_eq!(ranges.check_against(&add), Ok(()));
    }

    /// Element ranges are whole quanta, so the planner's own plan for 231
    /// elements gives a tile 232 of them; read back from the store, that
    /// plan still fits its signature.
    #[test]
    fn the_planners_range_past_the_last_element_fits_its_signature() {
        // (shape, tiles, whether a range runs past the last element)
        for (shape, tiles, past) in [
            (vec![7, 33], 3, true),
            (vec![3, 5], 1, true),
            (vec![119], 2, true),
            (vec![64], 2, false),
        ] {
            let signature = OpSignature {
                kind: SignatureKind::Gelu,
                inputs: vec![operand(&shape, DType::F16, false)],
                output: operand(&shape, DType::F16, false),
                tiles,
                target: crate::target::TargetId::Ipu21,
                unread: false,
                spread: 0,
            };
            let plans = finalists(&signature, &IPU21);
            assert_eq!(
                plans.finalists.iter().any(|c| matches!(
                    c.partition,
                    Partition::Elements { elements, per_tile, .. } if per_tile > elements
                )),
                past,
                "{shape:?}"
            );
            for selected in 0..plans.finalists.len() {
                let plans = OperatorPlans {
                    selected,
                    ..plans.clone()
                };
                assert_eq!(
                    plans.check_against(&signature),
                    Ok(()),
                    "{shape:?} {selected}"
                );
            }
        }
    }

    /// A residual add gathers both of its operands, and `sub(x, mean)`
    /// receives its `[rows, 1]` mean broadcast to the whole share: lowering
    /// copies each mean to every element it fills. A bias that is a weight
    /// is laid out where it is used and costs no exchange.
    #[test]
    fn every_operand_computed_on_the_device_is_received() {
        let signature = |kind, second: Operand| OpSignature {
            kind,
            inputs: vec![operand(&[64, 256], DType::F16, false), second],
            output: operand(&[64, 256], DType::F16, false),
            tiles: 16,
            target: crate::target::TargetId::Ipu21,
            unread: false,
            spread: 0,
        };
        let exchange = |signature: &OpSignature| {
            let plans = finalists(signature, &IPU21);
            let best = plans.selected();
            format!(
                "tiles={} exchange {} phases={} peak_standard={}\n",
                best.tiles_used,
                best.estimate.exchange_cycles,
                best.estimate.exchange_phases,
                best.estimate.peak_standard_bytes
            )
        };
        let residual = signature(SignatureKind::Add, operand(&[64, 256], DType::F16, false));
        let bias = signature(SignatureKind::Add, operand(&[256], DType::F16, true));
        let centre = signature(
            SignatureKind::Binary { op: BinaryOp::Sub },
            operand(&[64, 1], DType::F16, false),
        );
        expect![[r#"
            tiles=16 exchange 1024 phases=1 peak_standard=6144
            tiles=16 exchange 512 phases=1 peak_standard=6144
            tiles=16 exchange 1024 phases=1 peak_standard=6144
        "#]]
        .assert_eq(
            &[residual, bias, centre]
                .iter()
                .map(exchange)
                .collect::<String>(),
        );
    }

    #[test]
    fn a_matmul_too_big_for_two_tiles_keeps_the_smallest_peak_then_least_resident_weight() {
        let signature = OpSignature {
            kind: SignatureKind::Matmul {
                transpose_rhs: false,
                epilogue: Vec::new(),
            },
            inputs: vec![
                operand(&[197, 1536], DType::F143, false),
                operand(&[1536, 384 * 8], DType::F143, true),
            ],
            output: operand(&[197, 384 * 8], DType::F16, false),
            tiles: 2,
            target: crate::target::TargetId::Ipu21,
            unread: false,
            spread: 0,
        };
        let plans = finalists(&signature, &IPU21);
        assert!(!fits_memory(
            &IPU21,
            &signature,
            plans.selected(),
            CODE_RESERVE_BYTES
        ));
        let key = |c: &Candidate| {
            (
                c.estimate.peak_total_bytes(),
                c.estimate.resident_weight_bytes,
            )
        };
        let best = key(plans.selected());
        assert!(plans.finalists.iter().all(|c| key(c) >= best));
    }

    /// An inner dimension of 269 AMP blocks (a prime) splits only unevenly
    /// (at most 16 ways here), so on 192 tiles the weights cannot stay
    /// within their budget once the replication levels have tightened it:
    /// the planner still finds a plan that fits tile memory, and a higher
    /// spread level asks each tile to hold less.
    #[test]
    fn a_matmul_over_the_weight_budget_still_fits_memory_and_spreads_further_when_asked() {
        let mut signature = OpSignature {
            kind: SignatureKind::Matmul {
                transpose_rhs: false,
                epilogue: Vec::new(),
            },
            inputs: vec![
                operand(&[1536, 4304], DType::F16, false),
                operand(&[4304, 64], DType::F16, true),
            ],
            output: operand(&[1536, 64], DType::F16, false),
            tiles: 192,
            target: crate::target::TargetId::Ipu21,
            unread: false,
            spread: REPLICATION_LEVELS,
        };
        let relaxed = finalists(&signature, &IPU21);
        assert!(!fits(
            &IPU21,
            &signature,
            relaxed.selected(),
            CODE_RESERVE_BYTES
        ));
        assert!(fits_memory(
            &IPU21,
            &signature,
            relaxed.selected(),
            CODE_RESERVE_BYTES
        ));
        signature.spread = REPLICATION_LEVELS + 1;
        let spread = finalists(&signature, &IPU21);
        assert!(fits_memory(
            &IPU21,
            &signature,
            spread.selected(),
            CODE_RESERVE_BYTES
        ));
        assert!(
            spread.selected().estimate.peak_total_bytes()
                < relaxed.selected().estimate.peak_total_bytes()
        );
    }

    /// The first spread levels halve how many copies of its weights an
    /// operation may keep (8, 4, 2, then 1 per tile on average) and leave
    /// the tile's memory whole; later levels halve the memory and keep 1.
    #[test]
    fn spread_levels_give_up_weight_copies_before_tile_memory() {
        let signature = |spread| OpSignature {
            kind: SignatureKind::Matmul {
                transpose_rhs: false,
                epilogue: Vec::new(),
            },
            inputs: vec![
                operand(&[197, 384], DType::F143, false),
                operand(&[384, 1536], DType::F143, true),
            ],
            output: operand(&[197, 1536], DType::F16, false),
            tiles: 64,
            target: crate::target::TargetId::Ipu21,
            unread: false,
            spread,
        };
        let once = (384 * 1536) / 64;
        let budgets: Vec<u64> = (0..6).map(|s| weight_budget(&signature(s))).collect();
        assert_eq!(budgets, [8 * once, 4 * once, 2 * once, once, once, once]);
        // A plan holding just under half the region fits at every
        // replication level and stops fitting at the first memory level.
        let region1 = IPU21.memory.region1_loadable_bytes();
        let mut candidate = finalists(&signature(0), &IPU21).selected().clone();
        candidate.estimate.peak_standard_bytes = 0;
        candidate.estimate.peak_interleaved_bytes = region1 / 2 + 8;
        let fit: Vec<bool> = (0..=REPLICATION_LEVELS + 1)
            .map(|s| fits_memory(&IPU21, &signature(s), &candidate, CODE_RESERVE_BYTES))
            .collect();
        assert_eq!(fit, [true, true, true, true, false]);
        // With the budget at 8 copies, fc1's plan keeps more than 2.
        let wide = finalists(&signature(0), &IPU21);
        assert!(wide.selected().estimate.resident_weight_data_bytes > 2 * once);
    }
}
