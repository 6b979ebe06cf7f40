//! The text summary `ipub profile` prints: totals, where the cycles went,
//! the biggest opportunities, and tables by operation, kernel and tile.

use super::analysis::{self, OpRow};
use super::{Profile, StepKind};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Busy tile-cycles of one kernel over the run, with its estimate.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct KernelRow {
    pub kernel: String,
    /// Tile-steps that ran it.
    pub runs: u64,
    pub busy_cycles: u64,
    /// The cost formulas' cycles over the tile-steps that have one.
    pub estimated_cycles: u64,
    /// Busy cycles of those tile-steps, to compare with the estimate.
    pub estimated_busy_cycles: u64,
}

/// Busy tile-cycles per kernel, most first.
pub(super) fn by_kernel(profile: &Profile) -> Vec<KernelRow> {
    let mut rows: BTreeMap<&str, KernelRow> = BTreeMap::new();
    for step in profile.steps.iter().filter(|s| s.kind == StepKind::Compute) {
        for tile in &step.tiles {
            let Some(kernel) = &tile.kernel else { continue };
            let row = rows.entry(kernel).or_insert_with(|| KernelRow {
                kernel: kernel.clone(),
                ..KernelRow::default()
            });
            row.runs += 1;
            row.busy_cycles += tile.busy_cycles;
            if let Some(estimate) = tile.estimated_cycles {
                row.estimated_cycles += estimate;
                row.estimated_busy_cycles += tile.busy_cycles;
            }
        }
    }
    let mut rows: Vec<KernelRow> = rows.into_values().collect();
    rows.sort_by(|a, b| {
        b.busy_cycles
            .cmp(&a.busy_cycles)
            .then_with(|| a.kernel.cmp(&b.kernel))
    });
    rows
}

/// `+12.3 %`, or `-` when there is nothing to compare.
pub(super) fn signed_percent(ratio: Option<f64>) -> String {
    ratio.map_or("-".into(), |r| format!("{:+.1} %", 100.0 * r))
}

fn error_of(measured: u64, estimated: u64) -> Option<f64> {
    (estimated > 0).then(|| measured as f64 / estimated as f64 - 1.0)
}

/// The text summary, with `top` rows per table.
pub(crate) fn summary(profile: &Profile, top: usize) -> String {
    let mut out = String::new();
    let total = profile.total_cycles.max(1) as f64;
    let _ = writeln!(
        out,
        "{}: {} cycles measured ({:.1} us at {:.2} GHz), {} estimated ({})",
        profile.project,
        profile.total_cycles,
        profile.micros(profile.total_cycles),
        profile.clock_hz as f64 / 1e9,
        profile.estimated_cycles,
        signed_percent(error_of(profile.total_cycles, profile.estimated_cycles))
    );
    let tiles = analysis::tile_totals(profile);
    let _ = write!(
        out,
        "{} of {} tiles used",
        analysis::used_tiles(profile),
        profile.target().tiles
    );
    if let Some((tile, cycles)) = analysis::bottleneck_tile(&tiles) {
        let share = 100.0 * cycles as f64 / total;
        // Below a tenth of the run the load is even: say so rather than
        // name a tile that only leads by a little.
        let lead = if share < 10.0 {
            "; no tile dominates:"
        } else {
            ";"
        };
        let _ = write!(
            out,
            "{lead} tile {tile} is the slowest in steps worth {cycles} cycles ({share:.1} %)"
        );
    }
    out.push('\n');

    let _ = writeln!(out, "\nwhere the cycles went");
    let kinds = analysis::by_kind(profile);
    for kind in StepKind::ALL {
        let cycles = kinds.get(kind);
        let _ = writeln!(
            out,
            "  {:<10} {cycles:>12} cycles {:>6.1} %",
            kind.name(),
            100.0 * cycles as f64 / total
        );
    }

    let ops = analysis::op_rows(profile);
    let opportunities = analysis::opportunities(profile, &ops);
    if !opportunities.is_empty() {
        let _ = writeln!(out, "\nbiggest opportunities");
        for (i, o) in opportunities.iter().enumerate() {
            let _ = writeln!(
                out,
                "  {}. {} (up to {} cycles): {}",
                i + 1,
                o.title,
                super::thousands(o.saving_cycles),
                o.detail
            );
        }
    }

    // Views (reshapes, transposes) run no steps and cost nothing.
    let mut by_time: Vec<&OpRow> = ops
        .iter()
        .filter(|o| o.steps > 0 || o.estimated.is_some_and(|e| e.total() > 0))
        .collect();
    by_time.sort_by(|a, b| b.total().cmp(&a.total()).then_with(|| a.name.cmp(&b.name)));
    let _ = writeln!(
        out,
        "\nby operation{:>31} {:>6} {:>12} {:>9} {:>6} {:>9}",
        "cycles", "share", "estimated", "error", "AMP", "exchange"
    );
    for op in by_time.iter().take(top) {
        let _ = writeln!(
            out,
            "  {:<28} {:>12} {:>5.1}% {:>12} {:>9} {:>6} {:>8.0}%",
            op.name,
            op.total(),
            100.0 * op.total() as f64 / total,
            op.estimated
                .map_or("-".to_string(), |e| e.total().to_string()),
            signed_percent(op.error()),
            op.amp_utilisation()
                .map_or("-".to_string(), |u| format!("{:.1}%", 100.0 * u)),
            100.0 * op.exchange_share()
        );
    }

    let _ = writeln!(
        out,
        "\nby kernel{:>43} {:>6} {:>9}",
        "busy tile-cycles", "runs", "error"
    );
    for row in by_kernel(profile).iter().take(top) {
        let _ = writeln!(
            out,
            "  {:<40} {:>10} {:>6} {:>9}",
            row.kernel,
            row.busy_cycles,
            row.runs,
            signed_percent(error_of(row.estimated_busy_cycles, row.estimated_cycles))
        );
    }

    let mut busiest = tiles.clone();
    busiest.sort_by(|a, b| {
        (b.compute_cycles + b.exchange_cycles)
            .cmp(&(a.compute_cycles + a.exchange_cycles))
            .then(a.tile.cmp(&b.tile))
    });
    let _ = writeln!(
        out,
        "\nby tile (busiest){:>16} {:>12} {:>12} {:>12}",
        "compute", "exchange", "bytes in", "peak memory"
    );
    for t in busiest.iter().take(top) {
        let _ = writeln!(
            out,
            "  tile {:>4} {:>21} {:>12} {:>12} {:>12}",
            t.tile, t.compute_cycles, t.exchange_cycles, t.bytes_in, t.peak_memory
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::tests::sample;
    use super::*;
    use expect_test::expect;

    #[test]
    fn summaries_attribute_cycles() {
        expect![[r#"
            sample: 3000 cycles measured (2.0 us at 1.50 GHz), 2800 estimated (+7.1 %)
            2 of 1472 tiles used; tile 0 is the slowest in steps worth 1400 cycles (46.7 %)

            where the cycles went
              compute            2200 cycles   73.3 %
              exchange            200 cycles    6.7 %
              sync                600 cycles   20.0 %
              host                  0 cycles    0.0 %

            biggest opportunities
              1. Bring `qkv` closer to the AMP roofline (up to 800 cycles): 33.3 % AMP utilisation: 1,200 cycles measured, 400 at the AMP peak on every tile
              2. Cut the exchange of `softmax` (up to 800 cycles): 800 cycles (26.7 % of the run) in exchange and sync, 44 % of the operation's time
              3. Balance `qkv` across its tiles (up to 50 cycles): its 2 tiles wait on average 50 cycles (1.7 % of the run) for the slowest tile (most often tile 0) in its compute steps

            by operation                         cycles  share    estimated     error    AMP  exchange
              softmax                              1800  60.0%         1700    +5.9 %      -       44%
              qkv                                  1200  40.0%         1000   +20.0 %  33.3%        0%

            by kernel                           busy tile-cycles   runs     error
              gemm_f8_k64_c16_r4                             2300      2   +15.0 %
              softmax_f16                                    1900      2   +11.8 %

            by tile (busiest)         compute     exchange     bytes in  peak memory
              tile    0                  2100          200          800        30720
              tile    1                  2100           50            0        30720
        "#]]
        .assert_eq(&summary(&sample(), 10));
    }
}
