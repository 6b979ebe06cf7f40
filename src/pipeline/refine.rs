//! Refinement of an operation's finalists with a physical exchange schedule.
//!
//! The analytical model ([`crate::plan::cost`]) counts the bytes a tile must
//! receive; it does not see how the transfers really fall on the tiles.
//! Refinement lowers the operation alone, with each finalist's partition and
//! its inputs where a producer leaves them (streamed inputs and weights
//! where the plan puts them), schedules every exchange phase the way the
//! package will ([`crate::schedule`]) and re-costs the finalist with the
//! scheduled horizons instead of the estimate. The finalist with the fewest
//! refined cycles is selected; ties keep the analytical order.
//!
//! The result goes to a synthetic element-wise reader spread the same way:
//! its scheduled gather is what the result's layout costs the operations
//! after it (a product written in the swapped orientation leaves row
//! blocks, which a row reader gathers element by element), not part of the
//! operation's cycles, and the selection weighs it with them. A result the
//! host alone reads ([`OpSignature::unread`]) has no reader: whatever its
//! layout, the host reads it once.
//!
//! An activation operand comes from a synthetic element-wise producer laid
//! out by the planner's own analytical choice for it: whole rows over the
//! tiles, or ranges of elements when the tensor has fewer rows than tiles.
//! A producer that always left whole rows made a whole-row consumer of a
//! range producer look free, which is what most activations of a
//! few-row model on the whole chip are. The producer's plan depends on the
//! operand's shape alone, so a plan still depends on its signature alone
//! and an edit elsewhere re-plans nothing.
//!
//! Before that, the finalist's tile mapping is screened: the same lowered
//! transfers with the consumer's tiles rotated against the producer's
//! (half-way and by one tile) are scheduled too, and the log says whether a
//! rotation would lower the exchange load. Lowering places shards on tiles
//! in grid order only, so a better rotation is reported (`mapped=false`)
//! rather than applied.

use crate::graph::{
    Check, DType, Graph, Op, OpId, OpKind, ReferencePrecision, Role, Tensor, TensorId,
};
use crate::lower::{local, BufferId, BufferRole, KernelRun, OperandRef, Program, Step};
use crate::partition::{BinaryOp, UnaryOp};
use crate::plan::signature::{OpSignature, SignatureKind};
use crate::plan::{Candidate, OperatorPlans, Partition, Refined};
use crate::target::Target;
use std::collections::{BTreeMap, HashMap};

/// The plans of one operation: the planner's finalists, refined, with the
/// one refinement selects.
pub(crate) fn operator_plans(signature: &OpSignature) -> OperatorPlans {
    let target = signature.target.spec();
    let mut plans = crate::plan::finalists(signature, target);
    plans.selected = select(signature, &mut plans.finalists);
    plans
}

/// A graph holding the operation and, for each operand that is neither a
/// weight nor a streamed input (both are written where the plan lays them
/// out), an element-wise producer (a GELU for f16, a cast from f16
/// otherwise) from a streamed input, spread over the tiles the way the
/// planner spreads it ([`producer_partition`]). `None` for views, which
/// have no device work to schedule.
pub(crate) fn one_op_graph(signature: &OpSignature) -> Option<Graph> {
    let kind = match signature.kind {
        SignatureKind::Matmul {
            transpose_rhs,
            ref epilogue,
        } => OpKind::Matmul {
            transpose_rhs,
            epilogue: epilogue.clone(),
        },
        SignatureKind::Cast => OpKind::Cast,
        SignatureKind::Add => OpKind::Add,
        SignatureKind::Gelu => OpKind::Gelu,
        SignatureKind::Softmax { scale_bits, causal } => OpKind::Softmax {
            scale: f32::from_bits(scale_bits),
            causal,
        },
        SignatureKind::Layernorm { epsilon_bits } => OpKind::Layernorm {
            epsilon: f32::from_bits(epsilon_bits),
        },
        SignatureKind::Rearrange { block } => OpKind::Rearrange { block },
        SignatureKind::Binary { op } => match op {
            BinaryOp::Mul => OpKind::Mul,
            BinaryOp::Sub => OpKind::Sub,
            BinaryOp::Div => OpKind::Div,
        },
        SignatureKind::Unary { op } => match op {
            UnaryOp::Silu => OpKind::Silu,
            UnaryOp::GeluTanh => OpKind::GeluTanh,
        },
        SignatureKind::Rmsnorm { epsilon_bits } => OpKind::Rmsnorm {
            epsilon: f32::from_bits(epsilon_bits),
        },
        SignatureKind::View => return None,
        SignatureKind::Concat { axis } => OpKind::Concat { axis },
        SignatureKind::Reduce { reduction } => OpKind::Reduce { reduction },
    };
    let tensor = |name: String, operand: &crate::plan::signature::Operand, role: Role| Tensor {
        name,
        shape: operand.shape.clone(),
        dtype: operand.dtype,
        scale: operand.scale,
        role,
        init: None,
        repeat: None,
        written_name: None,
    };
    let mut tensors = Vec::new();
    let mut ops = Vec::new();
    let mut inputs = Vec::new();
    for (i, operand) in signature.inputs.iter().enumerate() {
        if operand.weight || operand.host {
            let role = if operand.weight {
                Role::Weight
            } else {
                Role::Input
            };
            inputs.push(TensorId(tensors.len() as u32));
            tensors.push(tensor(format!("in{i}"), operand, role));
            continue;
        }
        let source = TensorId(tensors.len() as u32);
        tensors.push(Tensor {
            dtype: DType::F16,
            scale: 0,
            ..tensor(format!("src{i}"), operand, Role::Input)
        });
        let produced = TensorId(tensors.len() as u32);
        tensors.push(tensor(format!("in{i}"), operand, Role::Activation));
        ops.push(Op {
            name: format!("produce{i}"),
            kind: elementwise(operand.dtype),
            inputs: vec![source],
            output: produced,
        });
        inputs.push(produced);
    }
    let output = TensorId(tensors.len() as u32);
    tensors.push(tensor("out".into(), &signature.output, Role::Activation));
    ops.push(Op {
        name: PLANNED.into(),
        kind,
        inputs,
        output,
    });
    // The result's reader: an element-wise operation in f16, spread as the
    // planner spreads it, standing for the operations that read the result
    // along its rows (norms, softmaxes, adds, the next product's rows).
    // None when the host alone reads the result.
    let mut read = output;
    if !signature.unread {
        read = TensorId(tensors.len() as u32);
        tensors.push(Tensor {
            dtype: DType::F16,
            scale: 0,
            ..tensor(READER.into(), &signature.output, Role::Activation)
        });
        ops.push(Op {
            name: READER.into(),
            kind: elementwise(signature.output.dtype),
            inputs: vec![output],
            output: read,
        });
    }
    Some(Graph {
        name: "refine".into(),
        target: signature.target,
        tiles: signature.tiles,
        seed: 0,
        ops,
        tensors,
        repeats: Vec::new(),
        outputs: vec![read],
        check: Check {
            reference_precision: ReferencePrecision::Device,
            min_cosine_similarity: 0.0,
            max_abs_error: f64::INFINITY,
            outputs: vec![read],
        },
    })
}

/// The element-wise operation of a synthetic producer or reader next to a
/// tensor of `dtype`: a GELU in f16, a cast otherwise.
fn elementwise(dtype: DType) -> OpKind {
    match dtype {
        DType::F16 => OpKind::Gelu,
        _ => OpKind::Cast,
    }
}

/// The name of [`one_op_graph`]'s reader of the result.
const READER: &str = "read";

/// The name of the operation [`one_op_graph`] plans.
const PLANNED: &str = "op";

/// The operation [`one_op_graph`] plans: the last but its reader.
fn planned(graph: &Graph) -> OpId {
    let reader = graph.ops.last().is_some_and(|op| op.name == READER);
    OpId(graph.ops.len().saturating_sub(1 + usize::from(reader)) as u32)
}

/// How a synthetic producer spreads its result: the way the planner would
/// spread it, by its analytical choice for the producer's own signature
/// (a function of the consumer's signature alone, so a plan still depends
/// on nothing outside it). An element-wise producer with fewer rows than
/// tiles is cut into ranges of elements ([`Partition::Elements`]), and a
/// whole-row consumer of such a producer pays the exchange it really pays.
fn producer_partition(target: &Target, graph: &Graph, op: &Op) -> Partition {
    crate::plan::finalists(&OpSignature::of(graph, op), target)
        .selected()
        .partition
        .clone()
}

/// The partitions of `graph`'s synthetic producers and its reader (every
/// operation but the planned one), which every finalist's refinement
/// shares.
fn producer_partitions(target: &Target, graph: &Graph) -> HashMap<OpId, Partition> {
    let consumer = planned(graph);
    (0..graph.ops.len() as u32)
        .map(OpId)
        .filter(|&op| op != consumer)
        .map(|op| (op, producer_partition(target, graph, graph.op(op))))
        .collect()
}

/// Lowers `graph` with `candidate` for its last operation and its
/// producers as `producers` lays them out, and schedules the phases that
/// gather that operation's operands; `None` when lowering refuses the
/// partition (the finalist keeps its analytical figures).
pub(crate) fn refine(
    target: &Target,
    graph: &Graph,
    producers: &HashMap<OpId, Partition>,
    candidate: &Candidate,
) -> Option<Refined> {
    if candidate.partition == Partition::View {
        return None;
    }
    let consumer = planned(graph);
    let plan_of = |op: OpId| match producers.get(&op) {
        Some(partition) => partition.clone(),
        None => candidate.partition.clone(),
    };
    let program = crate::lower::lower(graph, &plan_of).ok()?;
    // The exchange phases of the operation named `name`.
    let phases_of = |name: &str| -> Vec<&crate::lower::ExchangePhase> {
        let purposes = crate::lower::ExchangePhase::purposes_of(name);
        program
            .phases
            .iter()
            .filter(|p| purposes.contains(&p.purpose))
            .collect()
    };
    let horizons = |phases: &[&crate::lower::ExchangePhase]| -> u64 {
        phases
            .iter()
            .map(|phase| crate::schedule::exchange_schedule(target, &program, phase).horizon())
            .sum()
    };
    let feeding = phases_of(&graph.op(consumer).name);
    let scheduled = horizons(&feeding);
    // The reader's gather of the result: what the result's layout costs
    // the operations after it.
    let read = phases_of(READER);
    let estimate = &candidate.estimate;
    let mine = |buffer: BufferId| match program.buffer(buffer).role {
        BufferRole::Operand { op, .. }
        | BufferRole::Partial { op, .. }
        | BufferRole::Intermediate { op } => op == consumer,
        BufferRole::Activation { tensor } => tensor == graph.op(consumer).output,
        _ => false,
    };
    let rearranges = rearranges(&program, consumer);
    // What moves into the operation: its transfers, and the parts of its
    // operands a tile holds itself (local now, but not once rotated).
    let moves = tile_moves(
        &program,
        &mine,
        feeding
            .iter()
            .flat_map(|phase| &phase.transfers)
            .flat_map(|t| {
                t.destinations
                    .iter()
                    .map(|&(destination, _)| (t.source, destination, u64::from(t.bytes)))
            })
            .chain(rearranges.iter().filter_map(|(run, copy)| {
                match (run.operands.first()?, run.operands.last()?) {
                    (OperandRef::Buffer(from), OperandRef::Buffer(to)) => {
                        Some((*from, *to, copy.bytes()))
                    }
                    _ => None,
                }
            })),
    );
    let tiles = TileIndex::of(&program);
    let baseline_pressure = pressure(&tiles, &moves, 0);
    let count = tiles.order.len() as u32;
    let best_rotation_pressure = [count / 2, 1]
        .into_iter()
        .filter(|&r| r > 0 && r < count)
        .map(|r| pressure(&tiles, &moves, r))
        .min()
        .unwrap_or(baseline_pressure);
    let rearrange = rearrange_cycles(&rearranges);
    Some(Refined {
        scheduled_exchange_cycles: scheduled,
        rearrange_cycles: rearrange,
        refined_cycles: estimate.compute_cycles + estimate.sync_cycles + scheduled + rearrange,
        reader_exchange_cycles: horizons(&read),
        baseline_pressure,
        best_rotation_pressure,
    })
}

/// The rearrange runs in `op`'s compute steps, with the copies they make.
fn rearranges(program: &Program, op: OpId) -> Vec<(&KernelRun, local::BlockCopy)> {
    fn add<'p>(steps: &'p [Step], op: OpId, out: &mut Vec<(&'p KernelRun, local::BlockCopy)>) {
        for step in steps {
            match step {
                Step::Compute { op: o, runs } if *o == op => out.extend(
                    runs.iter()
                        .filter(|r| r.kernel == local::KERNEL)
                        .filter_map(|r| Some((r, local::BlockCopy::from_params(&r.params)?))),
                ),
                Step::Repeat { body, .. } => add(body, op, out),
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    add(&program.steps, op, &mut out);
    out
}

/// The cycles of the busiest tile's rearranges in `op`'s compute steps of
/// `program`: compute its plan's estimate does not hold, as the plan
/// cannot know which pieces of its operands a tile already holds.
pub(super) fn held_rearrange_cycles(program: &Program, op: OpId) -> u64 {
    rearrange_cycles(&rearranges(program, op))
}

/// The cycles of the busiest tile's rearranges.
fn rearrange_cycles(rearranges: &[(&KernelRun, local::BlockCopy)]) -> u64 {
    let mut per_tile: BTreeMap<u32, u64> = BTreeMap::new();
    for (run, copy) in rearranges {
        *per_tile.entry(run.tile).or_default() += crate::plan::cost::block_copy_cycles(
            u64::from(copy.outer),
            u64::from(copy.inner),
            u64::from(copy.words),
        );
    }
    per_tile.values().copied().max().unwrap_or(0)
}

/// Bytes copied from one buffer to another.
type Move = (BufferId, BufferId, u64);

/// A move as the tiles it joins, `(from, to, bytes)`: each end's tile,
/// with [`MINE`] set when that end is one of the operation's own buffers
/// (the ones a rotation moves). Pressure depends on nothing else, so the
/// buffers are looked up once, not once per rotation screened, and nothing
/// needs sorting.
type TileMove = (u32, u32, u64);

/// The flag of a [`TileMove`] end that rotates with the operation.
const MINE: u32 = 1 << 31;

fn tile_moves(
    program: &Program,
    mine: &dyn Fn(BufferId) -> bool,
    moves: impl Iterator<Item = Move>,
) -> Vec<TileMove> {
    let end = |buffer: BufferId| program.buffer(buffer).tile | if mine(buffer) { MINE } else { 0 };
    moves
        .map(|(source, destination, bytes)| (end(source), end(destination), bytes))
        .collect()
}

/// The program's tiles in order, and each tile's position among them,
/// indexed by tile number, so rotating a tile is two lookups.
struct TileIndex {
    order: Vec<u32>,
    position: Vec<u32>,
}

impl TileIndex {
    fn of(program: &Program) -> TileIndex {
        let order = program.tiles();
        let slots = order.last().map_or(0, |&t| t as usize + 1);
        let mut position = vec![0; slots];
        for (index, &tile) in order.iter().enumerate() {
            position[tile as usize] = index as u32;
        }
        TileIndex { order, position }
    }
}

/// The busiest tile's exchange bytes (sent or received, whichever is
/// larger) when the operation's own buffers (the ends marked [`MINE`])
/// move `rotation` tiles along while its operands stay where their
/// producers left them.
fn pressure(tiles: &TileIndex, moves: &[TileMove], rotation: u32) -> u64 {
    let n = tiles.order.len().max(1);
    let moved = |end: u32| {
        let tile = end & !MINE;
        if rotation == 0 || end & MINE == 0 {
            return tile;
        }
        let index = tiles.position[tile as usize] as usize;
        tiles.order[(index + rotation as usize) % n]
    };
    let mut sent = vec![0u64; tiles.position.len()];
    let mut received = vec![0u64; tiles.position.len()];
    for &(source, destination, bytes) in moves {
        let (from, to) = (moved(source), moved(destination));
        if to != from {
            sent[from as usize] += bytes;
            received[to as usize] += bytes;
        }
    }
    sent.into_iter().chain(received).max().unwrap_or(0)
}

/// How many finalists are refined before the others are screened against
/// them: the analytical best alone. A fixed number, not the machine's
/// thread count, so which finalists are pruned (and the plan dump) is the
/// same on every machine.
pub(crate) const FIRST_REFINED: usize = 1;

/// The share of its estimated exchange a later finalist is assumed to pay
/// at least once scheduled, as a fraction `numerator / denominator`: the
/// documented pruning margin.
///
/// Refinement only adds scheduled exchange and rearrange cycles to the
/// estimated compute and sync, so compute plus sync is a proven lower
/// bound; but it leaves most of a later finalist's exchange in, and at full
/// chip every refinement is a full lowering. The schedule does undercut
/// the estimate (the estimate counts every gathered byte, the schedule
/// finds the ones a producer already left on the tile), and most where a
/// finalist lays out its operands as their producers do, which is the
/// analytical best, refined first. A later finalist can undercut it too:
/// the GEMMs of the shipped projects by up to a sixth of their estimated
/// exchange (mlp-f16's second product, 2,712 of 16,384 cycles), a row
/// operation by all of it. But none that would then have been selected:
/// over every shipped project, keeping three quarters of the exchange
/// selects what refining every finalist selects (the 64-tile ones are a
/// test, `pruning_selects_what_refining_every_finalist_selects`; the
/// full-chip packages are the same as with a half kept). A finalist whose
/// schedule would drop more than a quarter of its estimated exchange and
/// would then win is the case this prunes wrongly. At full chip it prunes
/// most later GEMM finalists unrefined: a cold `siglip-block-f8` refines
/// 39 finalists where keeping a half refined 57.
pub(crate) const PRUNE_EXCHANGE_KEPT: (u64, u64) = (3, 4);

/// The cycles below which a finalist is not pruned: its estimated compute
/// and sync (a proven lower bound, see [`PRUNE_EXCHANGE_KEPT`]) plus the
/// kept share of its estimated exchange.
pub(crate) fn pruning_bound_cycles(candidate: &Candidate) -> u64 {
    let e = &candidate.estimate;
    let (kept, of) = PRUNE_EXCHANGE_KEPT;
    e.compute_cycles + e.sync_cycles + e.exchange_cycles * kept / of.max(1)
}

/// The cycles a finalist is selected by: refined if it was, with its
/// reader's gather of the result, estimated if lowering refused it.
pub(crate) fn selection_cycles(candidate: &Candidate) -> u64 {
    candidate
        .refined
        .map_or(candidate.estimate.total_cycles(), |r| {
            r.refined_cycles + r.reader_exchange_cycles
        })
}

/// Refines the finalists within the refinement budget, logs each step as
/// the seed does and returns the index of the selected one.
///
/// The budget: at most [`crate::plan::FINALISTS`] lowerings of the
/// operation alone per signature (and so per plan query), two rotations
/// screened per finalist. The first [`FIRST_REFINED`] finalists are
/// refined; every later one whose [`pruning_bound_cycles`] cannot beat the
/// best of them is pruned unrefined, and the rest are refined in parallel.
/// The finalist after the first ones may be refined while they are, by a
/// thread that would otherwise wait; its refinement is dropped if it is
/// pruned, so what is selected and logged does not depend on it.
/// A pruned finalist comes after the incumbent in the analytical order,
/// which breaks ties, so pruning changes the selection only where the
/// documented margin ([`PRUNE_EXCHANGE_KEPT`]) does not hold.
pub(crate) fn select(signature: &OpSignature, finalists: &mut [Candidate]) -> usize {
    let target = signature.target.spec();
    use rayon::prelude::*;
    let Some(graph) = one_op_graph(signature) else {
        return 0;
    };
    let producers = producer_partitions(target, &graph);
    let first = finalists.len().min(FIRST_REFINED);
    let (leaders, others) = finalists.split_at_mut(first);
    // While the leaders are refined, a thread with nothing else to do
    // refines the next finalist too, in case it is not pruned. Started
    // only before the leaders are done (when it runs on the thread that
    // refined them, it is left to the usual course), and kept only if the
    // finalist is not pruned, so the result is the same either way.
    let leaders_done = std::sync::atomic::AtomicBool::new(false);
    let ((), speculative) = rayon::join(
        || {
            leaders
                .par_iter_mut()
                .for_each(|c| c.refined = refine(target, &graph, &producers, c));
            leaders_done.store(true, std::sync::atomic::Ordering::Release);
        },
        || match leaders_done.load(std::sync::atomic::Ordering::Acquire) {
            true => None,
            false => others
                .first()
                .map(|c| refine(target, &graph, &producers, c)),
        },
    );
    let incumbent = leaders
        .iter()
        .map(selection_cycles)
        .min()
        .unwrap_or(u64::MAX);
    let mut pruned = 0usize;
    for (index, candidate) in others.iter_mut().enumerate() {
        let bound = pruning_bound_cycles(candidate);
        if bound >= incumbent {
            candidate.pruned = true;
            pruned += 1;
            tracing::debug!(
                finalist = first + index,
                bound_cycles = bound,
                incumbent_cycles = incumbent,
                "pruned operator-plan finalist by its bound"
            );
        }
    }
    let ahead = match (others.first_mut(), speculative) {
        (Some(next), Some(refined)) if !next.pruned => {
            next.refined = refined;
            1
        }
        _ => 0,
    };
    others
        .par_iter_mut()
        .skip(ahead)
        .filter(|c| !c.pruned)
        .for_each(|c| c.refined = refine(target, &graph, &producers, c));
    tracing::debug!(
        finalists = finalists.len(),
        pruned,
        refined = finalists.len() - pruned,
        "refined operator-plan finalists"
    );
    for (index, candidate) in finalists.iter().enumerate() {
        let Some(r) = candidate.refined else { continue };
        let e = &candidate.estimate;
        tracing::debug!(
            candidates = 3,
            baseline_cycles =
                r.baseline_pressure / u64::from(target.exchange.bytes_per_cycle.max(1)),
            candidate_cycles =
                r.best_rotation_pressure / u64::from(target.exchange.bytes_per_cycle.max(1)),
            baseline_pressure = r.baseline_pressure,
            candidate_pressure = r.best_rotation_pressure,
            "screened tile mappings by exchange resource load"
        );
        tracing::debug!(
            finalist = index,
            modelled_cycles = r.refined_cycles,
            estimated_cycles = e.total_cycles(),
            estimated_exchange_cycles = e.exchange_cycles,
            "modelled expanded operator plan"
        );
        tracing::debug!(
            finalist = index,
            mapped = false,
            analytical_cycles = e.total_cycles(),
            analytical_exchange_cycles = e.exchange_cycles,
            scheduled_exchange_cycles = r.scheduled_exchange_cycles,
            refined_cycles = r.refined_cycles,
            "scheduled operator-plan finalist"
        );
    }
    let selected = finalists
        .iter()
        .enumerate()
        .filter(|(_, c)| !c.pruned)
        .min_by_key(|(index, c)| (selection_cycles(c), *index))
        .map_or(0, |(index, _)| index);
    tracing::info!(
        selected,
        mapped = false,
        "selected physically scheduled operator-plan finalist"
    );
    selected
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::DType;
    use crate::plan::signature::Operand;
    use crate::target::IPU21;

    fn matmul() -> OpSignature {
        let operand = |shape: &[usize], weight| Operand {
            shape: shape.to_vec(),
            dtype: DType::F16,
            scale: 0,
            weight,
            host: false,
        };
        OpSignature {
            kind: SignatureKind::Matmul {
                transpose_rhs: false,
                epilogue: Vec::new(),
            },
            inputs: vec![operand(&[16, 32], false), operand(&[32, 16], true)],
            output: operand(&[16, 16], false),
            tiles: 4,
            target: crate::target::TargetId::Ipu21,
            unread: false,
            spread: 0,
        }
    }

    #[test]
    fn the_operation_alone_gets_a_row_producer_for_each_activation() {
        let graph = one_op_graph(&matmul()).expect("a matmul has device work");
        let ops: Vec<String> = graph
            .ops
            .iter()
            .map(|op| format!("{} {}", op.name, op.kind.name()))
            .collect();
        assert_eq!(ops, ["produce0 gelu", "op matmul", "read gelu"]);
        assert_eq!(planned(&graph), OpId(1));
        let roles: Vec<Role> = graph.tensors.iter().map(|t| t.role).collect();
        assert_eq!(
            roles,
            [
                Role::Input,
                Role::Activation,
                Role::Weight,
                Role::Activation,
                Role::Activation
            ]
        );
        let view = OpSignature {
            kind: SignatureKind::View,
            ..matmul()
        };
        assert!(one_op_graph(&view).is_none());
        // A result the host alone reads gets no reader.
        let unread = OpSignature {
            unread: true,
            ..matmul()
        };
        let graph = one_op_graph(&unread).expect("a matmul has device work");
        let ops: Vec<&str> = graph.ops.iter().map(|op| op.name.as_str()).collect();
        assert_eq!(ops, ["produce0", "op"]);
        assert_eq!(planned(&graph), OpId(1));
        assert_eq!(graph.outputs, [graph.ops[1].output]);
        let plans = operator_plans(&unread);
        assert!(plans
            .finalists
            .iter()
            .filter_map(|c| c.refined)
            .all(|r| r.reader_exchange_cycles == 0));
    }

    #[test]
    fn refined_figures_come_from_the_scheduled_phases() {
        let plans = operator_plans(&matmul());
        let figures: Vec<String> = plans
            .finalists
            .iter()
            .map(|c| {
                let r = c.refined.expect("finalists are refined");
                format!(
                    "estimated {} refined {} scheduled {} rearrange {} pressure {}/{}",
                    c.estimate.total_cycles(),
                    r.refined_cycles,
                    r.scheduled_exchange_cycles,
                    r.rearrange_cycles,
                    r.baseline_pressure,
                    r.best_rotation_pressure
                )
            })
            .collect();
        expect_test::expect![[r#"
            [
                "estimated 1858 refined 2142 scheduled 0 rearrange 348 pressure 0/256",
                "estimated 1890 refined 2202 scheduled 60 rearrange 348 pressure 256/256",
                "estimated 1912 refined 2196 scheduled 0 rearrange 348 pressure 0/256",
                "estimated 1928 refined 2228 scheduled 80 rearrange 348 pressure 512/256",
            ]
        "#]]
        .assert_debug_eq(&figures);
    }

    /// Attention scores (six heads of 197 tokens on 64 tiles), whose
    /// softmax reads them by rows: the swapped orientation writes its shard
    /// in row blocks, so a row reader gathers it one element per transfer
    /// and pays a sender issue for each; the selection weighs that and
    /// keeps a plan whose rows arrive in channel-block runs.
    #[test]
    fn a_result_read_by_rows_weighs_the_readers_gather() {
        let operand = |shape: &[usize]| Operand {
            shape: shape.to_vec(),
            dtype: DType::F143,
            scale: 0,
            weight: false,
            host: false,
        };
        let signature = OpSignature {
            kind: SignatureKind::Matmul {
                transpose_rhs: true,
                epilogue: Vec::new(),
            },
            inputs: vec![operand(&[6, 197, 64]), operand(&[6, 197, 64])],
            output: Operand {
                dtype: DType::F16,
                ..operand(&[6, 197, 197])
            },
            tiles: 64,
            target: crate::target::TargetId::Ipu21,
            unread: false,
            spread: 0,
        };
        let plans = operator_plans(&signature);
        let swapped =
            |c: &Candidate| matches!(c.partition, Partition::Matmul { swapped: true, .. });
        let read = |c: &Candidate| c.refined.map(|r| r.reader_exchange_cycles);
        let selected = &plans.finalists[plans.selected];
        assert!(
            !swapped(selected),
            "{}",
            crate::plan::dump(&signature, &plans)
        );
        let flat = read(selected).expect("refined");
        for c in plans.finalists.iter().filter(|c| swapped(c)) {
            if let Some(cycles) = read(c) {
                assert!(cycles > 2 * flat, "{cycles} against {flat}");
            }
        }
        assert!(plans
            .finalists
            .iter()
            .any(|c| swapped(c) && read(c).is_some()));
    }

    /// The plan dump with refined figures and the reader's gather, by which
    /// the selected finalist (`*`) is chosen.
    #[test]
    fn fp8_gemm_on_64_tiles_selects_by_refined_cycles() {
        let operand = |shape: &[usize], weight| Operand {
            shape: shape.to_vec(),
            dtype: DType::F143,
            scale: -3,
            weight,
            host: false,
        };
        let signature = OpSignature {
            kind: SignatureKind::Matmul {
                transpose_rhs: false,
                epilogue: Vec::new(),
            },
            inputs: vec![operand(&[128, 512], false), operand(&[512, 64], true)],
            output: Operand {
                dtype: DType::F16,
                scale: 0,
                ..operand(&[128, 64], false)
            },
            tiles: 64,
            target: crate::target::TargetId::Ipu21,
            unread: false,
            spread: 0,
        };
        let plans = operator_plans(&signature);
        expect_test::expect![[r#"
            matmul(f143[128, 512]*2^-3, f143[512, 64]*2^-3) -> f16[128, 64] on 64 tiles
              candidates 740
             *finalist 0: grid b1xm8xn1xk8 shard 1x16x64x64 weights interleaved kernel gemm_f8_interleaved_k64_c64_r16 tiles=64 cycles=4466 (compute 2562 exchange 704 sync 1200) phases=2 peak_standard=0 peak_interleaved=9472 refined=4870 (scheduled exchange 760, rearrange 348, read 32, pressure 2688 rotated 2816)
              finalist 1: grid b1xm4xn2xk8 shard 1x32x64x32 weights interleaved kernel gemm_f8_interleaved_k64_c32_r32 tiles=64 cycles=4482 (compute 2322 exchange 960 sync 1200) phases=2 peak_standard=0 peak_interleaved=8448 refined=4844 (scheduled exchange 974, rearrange 348, read 72, pressure 3712 rotated 3840)
              finalist 2: grid b1xm8xn2xk4 shard 1x16x128x32 weights interleaved kernel gemm_f8_interleaved_k128_c32_r16 tiles=64 cycles=4562 (compute 2658 exchange 704 sync 1200) phases=2 peak_standard=0 peak_interleaved=8448 refined=4884 (scheduled exchange 678, rearrange 348, read 72, pressure 2560 rotated 2816)
              finalist 3: grid b1xm5xn2xk6 shard 1x26x96x32 weights interleaved kernel gemm_f8_interleaved_k96_c32_r26 tiles=60 cycles=4870 (compute 2646 exchange 1024 sync 1200) phases=2 peak_standard=0 peak_interleaved=9472 refined=5258 (scheduled exchange 1064, rearrange 348, read 90, pressure 4096 rotated 4096)
        "#]].assert_eq(&crate::plan::dump(&signature, &plans));
    }

    /// The pruning margin ([`PRUNE_EXCHANGE_KEPT`]) holds on every
    /// 64-tile example project: for each operation, selecting with pruning
    /// picks the finalist that refining every finalist picks.
    #[test]
    fn pruning_selects_what_refining_every_finalist_selects() {
        use crate::db::{Database, Db};
        let db = Database::new(std::sync::Arc::new(crate::vfs::OsFs));
        let root = camino::Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("projects");
        let (mut operations, mut pruned) = (0, 0);
        for name in [
            "matmul-f8",
            "mlp-f16",
            "attention-f16",
            "mixed-f8",
            "vit-fp8",
            "vit-head-f16",
            "llama-block-f16",
        ] {
            let file = db.file(&root.join(format!("{name}.toml")));
            for signature in crate::pipeline::op_signatures(&db, file) {
                let Some(graph) = one_op_graph(signature) else {
                    continue;
                };
                let target = signature.target.spec();
                let producers = producer_partitions(target, &graph);
                let mut finalists = crate::plan::finalists(signature, target).finalists;
                let every: Vec<u64> = finalists
                    .iter()
                    .map(|c| {
                        selection_cycles(&Candidate {
                            refined: refine(target, &graph, &producers, c),
                            ..c.clone()
                        })
                    })
                    .collect();
                let best = (0..every.len()).min_by_key(|&i| (every[i], i));
                let selected = select(signature, &mut finalists);
                assert_eq!(Some(selected), best, "{name}: {signature}: {every:?}");
                operations += 1;
                pruned += finalists.iter().filter(|c| c.pruned).count();
            }
        }
        assert!(
            operations > 40 && pruned > 40,
            "{operations} operations, {pruned} pruned"
        );
    }

    #[test]
    fn selection_follows_refined_cycles_not_the_analytical_order() {
        let mut finalists = crate::plan::finalists(&matmul(), &IPU21).finalists;
        // Put the best plan last: refinement still selects it.
        finalists.reverse();
        let selected = select(&matmul(), &mut finalists);
        assert_eq!(selected, finalists.len() - 1);
        let best = finalists[selected].refined.expect("refined").refined_cycles;
        assert!(finalists
            .iter()
            .all(|c| c.refined.expect("refined").refined_cycles >= best));
    }
}
