//! Plans that fit tile memory.
//!
//! Each operation is planned on its own ([`super::operator_plans`]), so no
//! plan knows what the others leave free on a tile. [`fitted_program`]
//! lowers the plans, and when the lowered program overfills a tile (its
//! live bytes do not fit, or first fit does not place them:
//! [`crate::place::pressure`]) it re-plans the operations owning most of
//! that tile one spread level higher (the first levels halve the copies
//! of its weights the tiles may keep, later ones what a tile may hold for
//! it: more tiles, smaller shards, K splits), and tries again.
//! Every later phase works on the program it settles on; the rounds it
//! needed are kept so a placement that still fails says what was tried.
//!
//! A program that fits at once costs one lowering, one pressure check and
//! one trial placement, and its plans are the per-signature queries at level 0, shared with
//! every other project and edit as before.

use super::error::LowerBug;
use super::{op_signatures, operator_plans, program_graph, target_of, BuildError, Signature};
use crate::db::{Db, SourceFile};
use crate::graph::{Graph, OpId};
use crate::lower::Program;
use crate::place::pressure::{overfull_tiles, unplaced_tiles, Overfull};
use crate::plan::signature::{OpSignature, SignatureKind};
use crate::plan::CODE_RESERVE_BYTES;
use crate::target::Target;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The highest spread level an operation is planned at.
pub(crate) const MAX_SPREAD: u8 = 4 + crate::plan::REPLICATION_LEVELS;

/// Re-planning rounds before the pipeline settles on what it has. A round
/// raises each operation one level at most, and relieving one tile can
/// overfill another, so a program may need many (llama-block-f16 on 17
/// tiles was 1 KB over after seven rounds, and fits after eleven); each
/// costs one lowering, and only programs that do not fit pay for them.
pub(crate) const MAX_FIT_ROUNDS: usize = 16;

/// The lowered program and the spread level each operation was planned at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fitted {
    pub program: Arc<Program>,
    /// One level per operation, in op order; all zero when the first plans
    /// fit.
    pub spreads: Vec<u8>,
    /// One line per re-planning round: the tile that did not fit and the
    /// operations spread further.
    pub attempts: Vec<String>,
    /// Why re-planning stopped while tiles were still overfull (`None`
    /// when the program fits).
    pub unresolved: Option<String>,
}

/// The program lowered from plans that fit (as far as re-planning gets).
#[salsa::tracked(returns(ref))]
pub(crate) fn fitted_program(db: &dyn Db, project: SourceFile) -> Result<Arc<Fitted>, BuildError> {
    let graph = program_graph(db, project).clone()?;
    let target = target_of(&graph);
    let signatures = op_signatures(db, project);
    let mut spreads = vec![0u8; signatures.len()];
    let mut attempts = Vec::new();
    // The operations the last round raised: their level before it and the
    // cycles the raise was expected to add.
    let mut last_round: Vec<(OpId, u8, u64)> = Vec::new();
    loop {
        let program = lowered(db, &graph, signatures, &spreads)?;
        let overfull = overfull(target, &graph, &program);
        let done = |attempts, unresolved| {
            Ok(Arc::new(Fitted {
                program: Arc::new(program.clone()),
                spreads: spreads.clone(),
                attempts,
                unresolved,
            }))
        };
        let Some(worst) = overfull.iter().max_by_key(|t| {
            (
                t.needed.saturating_sub(t.available),
                std::cmp::Reverse(t.tile),
            )
        }) else {
            // The program fits and places: at once (nothing raised), or
            // with the last round's raises, some of which it may not need.
            let program = undo_unneeded(
                db,
                &graph,
                signatures,
                &mut spreads,
                program,
                last_round,
                &mut attempts,
            );
            return Ok(Arc::new(Fitted {
                program: Arc::new(program),
                spreads,
                attempts,
                unresolved: None,
            }));
        };
        let worst = format!(
            "{} tiles overfull (tile {} needs {} of {} bytes)",
            overfull.len(),
            worst.tile,
            worst.needed,
            worst.available
        );
        // The cheapest relief for a tile that does not place, when it is
        // enough: region 0 may not take the standard buffers the
        // interleaved ones leave until held pieces are rearranged in steps
        // of their own.
        if let Some(program) = separated(&graph, &program)? {
            attempts.push(format!(
                "round {}: {worst}, {SEPARATED}",
                attempts.len() + 1
            ));
            return Ok(Arc::new(Fitted {
                program: Arc::new(program),
                spreads,
                attempts,
                unresolved: None,
            }));
        }
        if attempts.len() >= MAX_FIT_ROUNDS {
            let why = format!("{worst} after {MAX_FIT_ROUNDS} rounds");
            return done(attempts, Some(why));
        }
        // On each overfull tile (worst first), operations whose plans at
        // some higher level hold less per tile. A round first gives up
        // copies of weights (the replication levels); only when no tile has
        // an operation left that can do so does it confine plans to less
        // memory, so replication is given up everywhere first. `raised`
        // holds what each raised operation offers.
        let mut raised: BTreeMap<OpId, Offer> = BTreeMap::new();
        let mut by_excess: Vec<_> = overfull.iter().collect();
        by_excess.sort_by_key(|t| std::cmp::Reverse(t.needed.saturating_sub(t.available)));
        for (highest, tighter) in [
            (crate::plan::REPLICATION_LEVELS, Tighter::Weights),
            (MAX_SPREAD, Tighter::Peak),
        ] {
            for tile in &by_excess {
                // A tile whose interleaved buffers overfill region 1 needs
                // plans with fewer of those, whatever their total.
                let tighter = match (tighter, tile.region1_bound) {
                    (Tighter::Peak, true) => Tighter::Interleaved,
                    _ => tighter,
                };
                // One level per round and operation, and only as many
                // operations as the tile's excess asks for: an operation
                // raised for another tile may already relieve this one.
                let mut excess = tile.needed.saturating_sub(tile.available);
                let mut offers = Vec::new();
                for &(op, _) in &tile.by_op {
                    match raised.get(&op) {
                        Some(offer) => excess = excess.saturating_sub(offer.freed),
                        None => {
                            let i = op.0 as usize;
                            if let Some(offer) =
                                tighter_level(db, &signatures[i], spreads[i], highest, tighter)
                            {
                                offers.push((op, offer));
                            }
                        }
                    }
                }
                // The cheapest relief first: the fewest estimated cycles
                // the higher level adds per byte it frees.
                offers.sort_by(|(a_op, a), (b_op, b)| {
                    let a_cost = u128::from(a.extra_cycles) * u128::from(b.freed);
                    let b_cost = u128::from(b.extra_cycles) * u128::from(a.freed);
                    a_cost.cmp(&b_cost).then(a_op.cmp(b_op))
                });
                for (op, offer) in offers {
                    if excess == 0 {
                        break;
                    }
                    raised.insert(op, offer);
                    excess = excess.saturating_sub(offer.freed);
                }
            }
            if !raised.is_empty() {
                break;
            }
        }
        if raised.is_empty() {
            let why = format!("{worst}, and no operation on them can spread further");
            return done(attempts, Some(why));
        }
        last_round = raised
            .iter()
            .map(|(&op, offer)| (op, spreads[op.0 as usize], offer.extra_cycles))
            .collect();
        let names: Vec<String> = raised
            .iter()
            .map(|(&op, offer)| {
                spreads[op.0 as usize] = offer.level;
                format!("`{}` to level {}", graph.op(op).name, offer.level)
            })
            .collect();
        let attempt = format!(
            "round {}: {worst}, spread {}",
            attempts.len() + 1,
            names.join(", ")
        );
        tracing::info!(
            attempt = attempt.as_str(),
            "re-planned operations that overfill tiles"
        );
        attempts.push(attempt);
    }
}

/// The program with each of `raised` (an operation, its level before the
/// last round and the cycles its raise was expected to add) put back at
/// its earlier level when the program still fits and is estimated faster
/// without it, the costliest raise first. The round sized each raise from
/// the operation's own estimate, so together they may free more than the
/// tiles needed; and faster is judged over the whole program, since
/// raising one of several products of one input may let it share that
/// input's gathers with the others. Each undo is logged and kept in
/// `attempts`.
fn undo_unneeded(
    db: &dyn Db,
    graph: &Graph,
    signatures: &[OpSignature],
    spreads: &mut [u8],
    mut program: Program,
    mut raised: Vec<(OpId, u8, u64)>,
    attempts: &mut Vec<String>,
) -> Program {
    if raised.is_empty() {
        return program;
    }
    let target = target_of(graph);
    raised.sort_by_key(|&(op, _, extra)| (std::cmp::Reverse(extra), op));
    let mut best = estimated(db, graph, signatures, spreads, &program);
    for (op, before, _) in raised {
        let i = op.0 as usize;
        let raised_to = std::mem::replace(&mut spreads[i], before);
        // A program that does not lower at the lower level keeps the raise
        // (the raised one lowered).
        let better = lowered(db, graph, signatures, spreads)
            .ok()
            .filter(|undone| overfull(target, graph, undone).is_empty())
            .map(|undone| {
                let cycles = estimated(db, graph, signatures, spreads, &undone);
                (undone, cycles)
            })
            .filter(|&(_, cycles)| cycles < best);
        let Some((undone, cycles)) = better else {
            spreads[i] = raised_to;
            continue;
        };
        best = cycles;
        program = undone;
        let undo = format!("`{}` back to level {before}", graph.op(op).name);
        tracing::info!(undo = undo.as_str(), "kept an operation at its lower level");
        attempts.push(undo);
    }
    program
}

/// How a higher spread level must shrink an operation's selected plan to
/// help an overfull tile.
#[derive(Clone, Copy)]
enum Tighter {
    /// Fewer bytes of weights resident for the whole program.
    Weights,
    /// Fewer bytes per tile in all.
    Peak,
    /// Fewer bytes per tile in interleaved buffers (region 1).
    Interleaved,
}

/// What raising an operation one step offers an overfull tile.
#[derive(Clone, Copy, Debug)]
struct Offer {
    /// The level it rises to.
    level: u8,
    /// The bytes per tile its selected plan holds less there.
    freed: u64,
    /// The estimated cycles its selected plan takes more there (zero when
    /// it is no slower).
    extra_cycles: u64,
}

/// The lowest level above `level`, up to `highest`, at which the
/// operation's selected plan is tighter in the sense of `tighter`, if any
/// level is (views have no plans to change).
fn tighter_level(
    db: &dyn Db,
    signature: &OpSignature,
    level: u8,
    highest: u8,
    tighter: Tighter,
) -> Option<Offer> {
    if signature.kind == SignatureKind::View {
        return None;
    }
    let figures = |spread: u8| {
        let signature = OpSignature {
            spread,
            ..signature.clone()
        };
        let plans = operator_plans(db, Signature::new(db, signature));
        let selected = plans.selected();
        let estimate = &selected.estimate;
        let bytes = match tighter {
            Tighter::Weights => estimate.resident_weight_bytes,
            // Resident weights count twice, as the planner counts them
            // when nothing fits (`plan::finalists`): they stay beside
            // every other operation's peak.
            Tighter::Peak => estimate.peak_total_bytes() + estimate.resident_weight_bytes,
            Tighter::Interleaved => estimate.peak_interleaved_bytes,
        };
        let cycles = selected
            .refined
            .map_or(estimate.total_cycles(), |r| r.refined_cycles);
        (bytes, cycles)
    };
    let (now, cycles_now) = figures(level);
    (level + 1..=highest).find_map(|higher| {
        let (then, cycles_then) = figures(higher);
        (then < now).then(|| Offer {
            level: higher,
            freed: now - then,
            extra_cycles: cycles_then.saturating_sub(cycles_now),
        })
    })
}

/// Each operation's signature at the spread level the program was fitted
/// with (level 0 when the project does not lower).
pub(crate) fn planned_signatures(db: &dyn Db, project: SourceFile) -> Vec<OpSignature> {
    let signatures = op_signatures(db, project);
    match fitted_program(db, project) {
        Ok(fitted) => at_spreads(signatures, &fitted.spreads),
        Err(_) => signatures.clone(),
    }
}

fn at_spreads(signatures: &[OpSignature], spreads: &[u8]) -> Vec<OpSignature> {
    signatures
        .iter()
        .zip(spreads)
        .map(|(signature, &spread)| OpSignature {
            spread,
            ..signature.clone()
        })
        .collect()
}

/// The program's estimated cycles: each operation's selected plan at its
/// spread level, times its repeat count, with its exchange as lowered
/// ([`super::package::lowered_exchange`]).
fn estimated(
    db: &dyn Db,
    graph: &Graph,
    signatures: &[OpSignature],
    spreads: &[u8],
    program: &Program,
) -> u64 {
    let target = target_of(graph);
    let selected: Vec<&crate::plan::Candidate> = at_spreads(signatures, spreads)
        .into_iter()
        .map(|signature| operator_plans(db, Signature::new(db, signature)).selected())
        .collect();
    let exchanges = super::package::lowered_exchange(graph, target, program, &selected);
    selected
        .iter()
        .zip(exchanges)
        .enumerate()
        .map(|(i, (selected, (exchange, sync)))| {
            let op = OpId(i as u32);
            let executions = graph.repeat_of(op).map_or(1, |r| r.count);
            let compute = selected.estimate.compute_cycles
                + super::refine::held_rearrange_cycles(program, op);
            (compute + exchange + sync) * u64::from(executions)
        })
        .sum()
}

/// What [`separated`] does, for the rounds' log.
const SEPARATED: &str = "rearranges of held pieces in steps of their own";

/// `program`, which overfills some tile, with the rearranges of held
/// pieces in compute steps of their own ([`crate::lower::local::separate`]),
/// so that what they read dies before their operations' results are
/// written: when it has any, and fits and places so.
fn separated(graph: &Graph, program: &Program) -> Result<Option<Program>, BuildError> {
    let target = target_of(graph);
    let local = crate::lower::local::KERNEL;
    if !program.kernel_runs().iter().any(|r| r.kernel == local) {
        return Ok(None);
    }
    let mut separated = program.clone();
    crate::lower::local::separate(&mut separated.steps);
    crate::lower::verify::verify(graph, &separated).map_err(LowerBug::from)?;
    let fits = overfull(target, graph, &separated).is_empty();
    Ok(fits.then_some(separated))
}

/// The tiles `program` overfills: by the bytes alive at once, or, when
/// every tile's bytes fit, by placing them as `crate::place` does (first
/// fit, standard buffers in region 0 before region 1), with
/// [`CODE_RESERVE_BYTES`] for code and tables in both.
fn overfull(target: &Target, graph: &Graph, program: &Program) -> Vec<Overfull> {
    let by_bytes = overfull_tiles(target, graph, program, CODE_RESERVE_BYTES);
    if !by_bytes.is_empty() {
        return by_bytes;
    }
    unplaced_tiles(target, graph, program, CODE_RESERVE_BYTES)
}

/// Lowers and verifies the graph with each operation's selected plan at
/// its spread level.
fn lowered(
    db: &dyn Db,
    graph: &Graph,
    signatures: &[OpSignature],
    spreads: &[u8],
) -> Result<Program, BuildError> {
    let partitions: Vec<_> = at_spreads(signatures, spreads)
        .into_iter()
        .map(|s| {
            operator_plans(db, Signature::new(db, s))
                .selected()
                .partition
                .clone()
        })
        .collect();
    let plan_of = |op: OpId| partitions[op.0 as usize].clone();
    let mut program = crate::lower::lower(graph, &plan_of)?;
    crate::lower::merge_phases(&mut program);
    crate::lower::verify::verify(graph, &program).map_err(LowerBug::from)?;
    Ok(program)
}
