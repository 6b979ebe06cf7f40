//! Figures derived from a profile that the text summary, the HTML report
//! and the diff share: cycles per step kind, operation rows with estimates
//! beside measurements, per-tile totals, the critical path and the biggest
//! opportunities.

use super::{thousands, OpEstimate, Profile, StepKind, TileProfile};
use std::collections::BTreeMap;

/// Cycles split by step kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KindCycles {
    pub compute: u64,
    pub exchange: u64,
    pub sync: u64,
    pub host: u64,
}

impl KindCycles {
    pub(super) fn add(&mut self, kind: StepKind, cycles: u64) {
        *self.get_mut(kind) += cycles;
    }

    pub(super) fn get(&self, kind: StepKind) -> u64 {
        match kind {
            StepKind::Compute => self.compute,
            StepKind::Exchange => self.exchange,
            StepKind::Sync => self.sync,
            StepKind::Host => self.host,
        }
    }

    fn get_mut(&mut self, kind: StepKind) -> &mut u64 {
        match kind {
            StepKind::Compute => &mut self.compute,
            StepKind::Exchange => &mut self.exchange,
            StepKind::Sync => &mut self.sync,
            StepKind::Host => &mut self.host,
        }
    }

    pub fn total(&self) -> u64 {
        self.compute + self.exchange + self.sync + self.host
    }
}

/// Step cycles per kind over the whole run.
pub(super) fn by_kind(profile: &Profile) -> KindCycles {
    let mut cycles = KindCycles::default();
    for step in &profile.steps {
        cycles.add(step.kind, step.cycles);
    }
    cycles
}

/// The operation each step belongs to: its own, or for a sync the
/// operation of the exchange it precedes.
pub(super) fn step_ops(profile: &Profile) -> Vec<Option<&str>> {
    let steps = &profile.steps;
    (0..steps.len())
        .map(|i| {
            let step = &steps[i];
            match (step.kind, &step.op) {
                (_, Some(op)) => Some(op.as_str()),
                (StepKind::Sync, None) => steps
                    .get(i + 1)
                    .filter(|next| next.kind == StepKind::Exchange)
                    .and_then(|next| next.op.as_deref()),
                _ => None,
            }
        })
        .collect()
}

/// One operation's measured and estimated cycles over the whole run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpRow {
    pub name: String,
    /// `matmul`, `softmax`, ... (empty when the profile has no estimates).
    pub kind: String,
    /// The most tiles any of its compute steps ran on.
    pub tiles: u32,
    /// Steps attributed to it (every iteration counted).
    pub steps: u32,
    pub measured: KindCycles,
    /// The planner's estimate times the executions, when known.
    pub estimated: Option<KindCycles>,
    /// Matrix products: the AMP roofline over every execution.
    pub roofline_cycles: u64,
    /// Tile-cycles its compute steps' tiles spent waiting for the slowest
    /// tile, divided by the tiles: what perfect balance would save.
    pub imbalance_cycles: u64,
    /// The tile that set the pace in most of its compute cycles.
    pub slowest_tile: Option<u32>,
}

impl OpRow {
    pub fn total(&self) -> u64 {
        self.measured.total()
    }

    /// Measured over estimated, minus one (positive: slower than expected).
    pub(crate) fn error(&self) -> Option<f64> {
        let estimated = self.estimated?.total();
        (estimated > 0).then(|| self.total() as f64 / estimated as f64 - 1.0)
    }

    /// The AMP roofline over the measured cycles (matrix products).
    pub(super) fn amp_utilisation(&self) -> Option<f64> {
        (self.roofline_cycles > 0 && self.total() > 0)
            .then(|| self.roofline_cycles as f64 / self.total() as f64)
    }

    /// Exchange and sync over all of the operation's cycles.
    pub(super) fn exchange_share(&self) -> f64 {
        let total = self.total().max(1) as f64;
        (self.measured.exchange + self.measured.sync) as f64 / total
    }
}

fn estimated_kinds(op: &OpEstimate) -> KindCycles {
    let times = u64::from(op.executions.max(1));
    KindCycles {
        compute: op.compute_cycles * times,
        exchange: op.exchange_cycles * times,
        sync: op.sync_cycles * times,
        host: 0,
    }
}

/// Every operation, in program order (operations only the steps name
/// follow, by name).
pub fn op_rows(profile: &Profile) -> Vec<OpRow> {
    let mut rows: Vec<OpRow> = profile
        .ops
        .iter()
        .map(|op| OpRow {
            name: op.name.clone(),
            kind: op.kind.clone(),
            estimated: Some(estimated_kinds(op)),
            roofline_cycles: op.roofline_cycles * u64::from(op.executions.max(1)),
            ..OpRow::default()
        })
        .collect();
    let mut index: BTreeMap<String, usize> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| (r.name.clone(), i))
        .collect();
    let mut pace: Vec<BTreeMap<u32, u64>> = vec![BTreeMap::new(); rows.len()];
    for (step, op) in profile.steps.iter().zip(step_ops(profile)) {
        let Some(op) = op else { continue };
        let i = *index.entry(op.to_string()).or_insert_with(|| {
            rows.push(OpRow {
                name: op.to_string(),
                ..OpRow::default()
            });
            pace.push(BTreeMap::new());
            rows.len() - 1
        });
        let row = &mut rows[i];
        row.steps += 1;
        row.measured.add(step.kind, step.cycles);
        if step.kind == StepKind::Compute && !step.tiles.is_empty() {
            row.tiles = row.tiles.max(step.tiles.len() as u32);
            let busy: u64 = step.tiles.iter().map(|t| t.busy_cycles).sum();
            let mean = busy / step.tiles.len() as u64;
            row.imbalance_cycles += step.cycles.saturating_sub(mean);
            add_shares(&mut pace[i], &step.slowest_tiles(), step.cycles);
        }
    }
    for (row, pace) in rows.iter_mut().zip(pace) {
        row.slowest_tile = pace
            .into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
            .map(|(tile, _)| tile);
    }
    rows
}

/// Splits `cycles` evenly between `tiles` (the lowest tiles take the
/// remainder), adding each share to its entry: when several tiles are
/// equally slow, none of them alone sets the pace.
fn add_shares(into: &mut BTreeMap<u32, u64>, tiles: &[u32], cycles: u64) {
    let Some(count) = u64::try_from(tiles.len()).ok().filter(|&n| n > 0) else {
        return;
    };
    for (i, &tile) in tiles.iter().enumerate() {
        let share = cycles / count + u64::from((i as u64) < cycles % count);
        *into.entry(tile).or_default() += share;
    }
}

/// One used tile's totals over the run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TileTotals {
    pub tile: u32,
    /// Busy cycles in compute steps.
    pub compute_cycles: u64,
    /// Busy cycles in exchange steps.
    pub exchange_cycles: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Cycles of the steps in which this tile was the slowest (shared
    /// evenly when several were equally slow).
    pub critical_cycles: u64,
    /// Support blocks plus the most buffer bytes alive at once.
    pub peak_memory: u64,
}

/// Totals for every tile that took part in a step or holds memory,
/// ascending by tile.
pub(super) fn tile_totals(profile: &Profile) -> Vec<TileTotals> {
    fn totals(tiles: &mut BTreeMap<u32, TileTotals>, tile: u32) -> &mut TileTotals {
        tiles.entry(tile).or_insert_with(|| TileTotals {
            tile,
            ..TileTotals::default()
        })
    }
    let mut tiles: BTreeMap<u32, TileTotals> = BTreeMap::new();
    for step in &profile.steps {
        for activity in &step.tiles {
            let entry = totals(&mut tiles, activity.tile);
            match step.kind {
                StepKind::Compute => entry.compute_cycles += activity.busy_cycles,
                StepKind::Exchange => entry.exchange_cycles += activity.busy_cycles,
                StepKind::Sync | StepKind::Host => {}
            }
            entry.bytes_in += activity.bytes_in;
            entry.bytes_out += activity.bytes_out;
        }
        let mut shares = BTreeMap::new();
        add_shares(&mut shares, &step.slowest_tiles(), step.cycles);
        for (tile, cycles) in shares {
            totals(&mut tiles, tile).critical_cycles += cycles;
        }
    }
    for tile in &profile.tiles {
        totals(&mut tiles, tile.tile).peak_memory = peak_memory(tile).0;
    }
    tiles.into_values().collect()
}

/// A tile's peak memory (support blocks plus the most buffer bytes alive
/// in one step) and the step where it peaks.
pub(super) fn peak_memory(tile: &TileProfile) -> (u64, u32) {
    let support: u64 = tile.support.iter().map(|s| u64::from(s.bytes)).sum();
    let mut events: Vec<(u32, i64)> = Vec::with_capacity(2 * tile.buffers.len());
    for buffer in &tile.buffers {
        events.push((buffer.first_step, i64::from(buffer.bytes)));
        events.push((buffer.last_step + 1, -i64::from(buffer.bytes)));
    }
    events.sort_unstable();
    let (mut live, mut peak, mut at) = (0i64, 0i64, 0u32);
    let mut i = 0;
    while i < events.len() {
        let step = events[i].0;
        while i < events.len() && events[i].0 == step {
            live += events[i].1;
            i += 1;
        }
        if live > peak {
            peak = live;
            at = step;
        }
    }
    (support + peak.max(0) as u64, at)
}

/// Something worth changing, with the cycles it could save at most.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Opportunity {
    pub saving_cycles: u64,
    pub title: String,
    pub detail: String,
}

/// The three biggest opportunities: load imbalance in an operation's
/// compute, an operation's exchange and syncs, matrix products far from
/// the AMP roofline, and operations far slower than the planner estimated
/// (at least one and a half times), ranked by the cycles each could save.
pub(super) fn opportunities(profile: &Profile, ops: &[OpRow]) -> Vec<Opportunity> {
    let total = profile.total_cycles.max(1) as f64;
    let share = |cycles: u64| 100.0 * cycles as f64 / total;
    let mut found = Vec::new();
    for op in ops {
        if op.imbalance_cycles > 0 {
            let tile = op
                .slowest_tile
                .map_or(String::new(), |t| format!(" (most often tile {t})"));
            found.push(Opportunity {
                saving_cycles: op.imbalance_cycles,
                title: format!("Balance `{}` across its tiles", op.name),
                detail: format!(
                    "its {} tiles wait on average {} cycles ({:.1} % of the run) for the slowest tile{tile} in its compute steps",
                    op.tiles,
                    thousands(op.imbalance_cycles),
                    share(op.imbalance_cycles)
                ),
            });
        }
        let exchange = op.measured.exchange + op.measured.sync;
        if exchange > 0 {
            found.push(Opportunity {
                saving_cycles: exchange,
                title: format!("Cut the exchange of `{}`", op.name),
                detail: format!(
                    "{} cycles ({:.1} % of the run) in exchange and sync, {:.0} % of the operation's time",
                    thousands(exchange),
                    share(exchange),
                    100.0 * op.exchange_share()
                ),
            });
        }
        if let Some(estimated) = op.estimated.map(|e| e.total()).filter(|&e| e > 0) {
            let over = op.total().saturating_sub(estimated);
            if over * 2 > estimated {
                found.push(Opportunity {
                    saving_cycles: over,
                    title: format!("Find why `{}` is slower than planned", op.name),
                    detail: format!(
                        "{} cycles measured, {:.1} times the {} estimated: the planner costs it wrongly, so its choices for it and around it may be wrong",
                        thousands(op.total()),
                        op.total() as f64 / estimated as f64,
                        thousands(estimated)
                    ),
                });
            }
        }
        if let Some(utilisation) = op.amp_utilisation() {
            let gap = op.total().saturating_sub(op.roofline_cycles);
            found.push(Opportunity {
                saving_cycles: gap,
                title: format!("Bring `{}` closer to the AMP roofline", op.name),
                detail: format!(
                    "{:.1} % AMP utilisation: {} cycles measured, {} at the AMP peak on every tile",
                    100.0 * utilisation,
                    thousands(op.total()),
                    thousands(op.roofline_cycles)
                ),
            });
        }
    }
    // Savings under a percent of the run are not worth a line.
    found.retain(|o| o.saving_cycles * 100 >= profile.total_cycles);
    found.sort_by(|a, b| {
        b.saving_cycles
            .cmp(&a.saving_cycles)
            .then_with(|| a.title.cmp(&b.title))
    });
    found.truncate(3);
    found
}

/// Distinct tiles that took part in any step.
pub(super) fn used_tiles(profile: &Profile) -> usize {
    let mut tiles: Vec<u32> = profile
        .steps
        .iter()
        .flat_map(|s| s.tiles.iter().map(|t| t.tile))
        .chain(profile.tiles.iter().map(|t| t.tile))
        .collect();
    tiles.sort_unstable();
    tiles.dedup();
    tiles.len()
}

/// The tile that set the pace for the most cycles, with those cycles.
pub(super) fn bottleneck_tile(tiles: &[TileTotals]) -> Option<(u32, u64)> {
    tiles
        .iter()
        .filter(|t| t.critical_cycles > 0)
        .max_by(|a, b| {
            a.critical_cycles
                .cmp(&b.critical_cycles)
                .then(b.tile.cmp(&a.tile))
        })
        .map(|t| (t.tile, t.critical_cycles))
}

#[cfg(test)]
mod tests {
    use super::super::tests::sample;
    use super::*;

    #[test]
    fn operations_collect_their_steps_and_estimates() {
        let profile = sample();
        let rows = op_rows(&profile);
        assert_eq!(rows.len(), 2);
        let softmax = &rows[1];
        assert_eq!(softmax.name, "softmax");
        // Its exchange, the sync before it and its compute.
        assert_eq!(softmax.steps, 3);
        assert_eq!(softmax.measured.sync, 600);
        assert_eq!(softmax.measured.exchange, 200);
        assert_eq!(softmax.total(), 1800);
        assert_eq!(softmax.estimated.map(|e| e.total()), Some(1700));
        assert_eq!(softmax.imbalance_cycles, 1000 - 950);
        assert_eq!(softmax.slowest_tile, Some(1));
        let qkv = &rows[0];
        assert_eq!(qkv.amp_utilisation(), Some(400.0 / 1200.0));
        assert!((qkv.error().expect("estimated") - 0.2).abs() < 1e-9);
    }

    #[test]
    fn tiles_total_their_work_traffic_and_memory() {
        let tiles = tile_totals(&sample());
        assert_eq!(tiles.len(), 2);
        assert_eq!(tiles[0].compute_cycles, 2100);
        assert_eq!(tiles[0].bytes_in, 800);
        assert_eq!(tiles[1].bytes_out, 200);
        // qkv and the exchange are set by tile 0, softmax by tile 1.
        assert_eq!(tiles[0].critical_cycles, 1400);
        assert_eq!(tiles[1].critical_cycles, 1000);
        assert_eq!(bottleneck_tile(&tiles), Some((0, 1400)));
        // Code, then the input, weight and activation alive in step 1.
        assert_eq!(tiles[0].peak_memory, 4096 + 8192 + 16384 + 2048);
    }

    #[test]
    fn opportunities_are_ranked_by_what_they_could_save() {
        let profile = sample();
        let found = opportunities(&profile, &op_rows(&profile));
        let titles: Vec<&str> = found.iter().map(|o| o.title.as_str()).collect();
        assert_eq!(
            titles,
            [
                "Bring `qkv` closer to the AMP roofline",
                "Cut the exchange of `softmax`",
                "Balance `qkv` across its tiles",
            ]
        );
        // Equal savings rank by title.
        assert_eq!(found[0].saving_cycles, 800);
        assert_eq!(found[1].saving_cycles, 800);
    }
}
