//! Two runs compared: total and per-operation deltas, the tiles whose time
//! changed most, and what the build changed between them (from the
//! fingerprints each profile keeps of its package).

use super::analysis::{self, KindCycles, OpRow, TileTotals};
use super::{Profile, StepKind};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// One operation in either run.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct OpDelta {
    pub name: String,
    pub before: Option<OpRow>,
    pub after: Option<OpRow>,
}

impl OpDelta {
    pub(super) fn cycles(&self) -> (u64, u64) {
        (
            self.before.as_ref().map_or(0, OpRow::total),
            self.after.as_ref().map_or(0, OpRow::total),
        )
    }

    pub(super) fn delta(&self) -> i64 {
        let (a, b) = self.cycles();
        b as i64 - a as i64
    }
}

/// One tile's busy cycles and memory in both runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TileDelta {
    pub tile: u32,
    pub before: TileTotals,
    pub after: TileTotals,
}

impl TileDelta {
    fn busy(t: &TileTotals) -> u64 {
        t.compute_cycles + t.exchange_cycles
    }

    /// Busy cycles (compute and exchange) before and after.
    pub(super) fn busy_cycles(&self) -> (u64, u64) {
        (Self::busy(&self.before), Self::busy(&self.after))
    }

    pub(super) fn delta(&self) -> i64 {
        let (a, b) = self.busy_cycles();
        b as i64 - a as i64
    }

    /// Whether only one run used the tile.
    pub(super) fn note(&self) -> Option<&'static str> {
        match self.busy_cycles() {
            (0, b) if b > 0 => Some("newly used"),
            (a, 0) if a > 0 => Some("no longer used"),
            _ => None,
        }
    }
}

/// Everything `ipub profile diff` reports.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Diff {
    pub before_name: String,
    pub after_name: String,
    pub total: (u64, u64),
    pub estimated: (u64, u64),
    pub kinds: (KindCycles, KindCycles),
    /// Largest change first.
    pub ops: Vec<OpDelta>,
    /// Largest change in busy cycles first; tiles busy in either run.
    pub tiles: Vec<TileDelta>,
    /// What the build changed, one sentence each.
    pub build: Vec<String>,
}

/// `before` and `after` compared; `names` label them in the output.
pub(crate) fn diff(before: &Profile, after: &Profile, names: (&str, &str)) -> Diff {
    let rows_before = analysis::op_rows(before);
    let rows_after = analysis::op_rows(after);
    let mut names_in_order: Vec<String> = rows_after.iter().map(|r| r.name.clone()).collect();
    for row in &rows_before {
        if !names_in_order.contains(&row.name) {
            names_in_order.push(row.name.clone());
        }
    }
    let find = |rows: &[OpRow], name: &str| rows.iter().find(|r| r.name == name).cloned();
    let mut ops: Vec<OpDelta> = names_in_order
        .into_iter()
        .map(|name| OpDelta {
            before: find(&rows_before, &name),
            after: find(&rows_after, &name),
            name,
        })
        .collect();
    ops.sort_by_key(|d| std::cmp::Reverse(d.delta().unsigned_abs()));

    let mut tiles: BTreeMap<u32, TileDelta> = BTreeMap::new();
    for t in analysis::tile_totals(before) {
        let tile = t.tile;
        tiles.entry(tile).or_default().before = t;
    }
    for t in analysis::tile_totals(after) {
        let tile = t.tile;
        tiles.entry(tile).or_default().after = t;
    }
    let mut tiles: Vec<TileDelta> = tiles
        .into_iter()
        .map(|(tile, mut d)| {
            d.tile = tile;
            d
        })
        .collect();
    tiles.sort_by(|a, b| {
        b.delta()
            .unsigned_abs()
            .cmp(&a.delta().unsigned_abs())
            .then(a.tile.cmp(&b.tile))
    });

    Diff {
        before_name: names.0.to_string(),
        after_name: names.1.to_string(),
        total: (before.total_cycles, after.total_cycles),
        estimated: (before.estimated_cycles, after.estimated_cycles),
        kinds: (analysis::by_kind(before), analysis::by_kind(after)),
        build: build_changes(before, after, &rows_before, &rows_after),
        ops,
        tiles,
    }
}

/// Kernels each operation's compute steps ran.
fn op_kernels(profile: &Profile) -> BTreeMap<&str, BTreeSet<&str>> {
    let mut kernels: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for step in profile.steps.iter().filter(|s| s.kind == StepKind::Compute) {
        let Some(op) = &step.op else { continue };
        let set = kernels.entry(op).or_default();
        for tile in &step.tiles {
            if let Some(kernel) = &tile.kernel {
                set.extend(kernel.split('+'));
            }
        }
    }
    kernels
}

fn list<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    items
        .into_iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What differs between the two builds: the package, kernels, each
/// operation's plan, tile images, exchange programs and placements.
fn build_changes(
    before: &Profile,
    after: &Profile,
    rows_before: &[OpRow],
    rows_after: &[OpRow],
) -> Vec<String> {
    let mut out = Vec::new();
    let (Some(a), Some(b)) = (&before.build, &after.build) else {
        out.push(
            "the build of one run is unknown (a version 1 profile): only measurements compare"
                .to_string(),
        );
        return out;
    };
    if a.package_hash == b.package_hash {
        out.push("the same package ran both times: only the measurement can differ".into());
        return out;
    }
    if a.compiler_version != b.compiler_version {
        out.push(format!(
            "compiler {} -> {}",
            a.compiler_version, b.compiler_version
        ));
    }
    // A tile that runs several kernels in a step is listed under their
    // names joined with `+`; each kernel counts on its own here.
    let kernels_a: BTreeSet<&str> = a.kernels.iter().flat_map(|k| k.split('+')).collect();
    let kernels_b: BTreeSet<&str> = b.kernels.iter().flat_map(|k| k.split('+')).collect();
    let added: Vec<&str> = kernels_b.difference(&kernels_a).copied().collect();
    let removed: Vec<&str> = kernels_a.difference(&kernels_b).copied().collect();
    if !added.is_empty() {
        out.push(format!("kernels added: {}", list(added)));
    }
    if !removed.is_empty() {
        out.push(format!("kernels no longer run: {}", list(removed)));
    }

    let ops_a: BTreeMap<&str, _> = before.ops.iter().map(|o| (o.name.as_str(), o)).collect();
    let ops_b: BTreeMap<&str, _> = after.ops.iter().map(|o| (o.name.as_str(), o)).collect();
    let kernels_of_a = op_kernels(before);
    let kernels_of_b = op_kernels(after);
    for row in rows_after {
        let name = row.name.as_str();
        let Some(new) = ops_b.get(name) else { continue };
        let Some(old) = ops_a.get(name) else {
            out.push(format!("operation `{name}` is new"));
            continue;
        };
        let mut changes = Vec::new();
        if old.tiles != new.tiles {
            changes.push(format!("{} -> {} tiles", old.tiles, new.tiles));
        }
        if old.total_cycles() != new.total_cycles() {
            changes.push(format!(
                "estimate {} -> {} cycles",
                old.total_cycles(),
                new.total_cycles()
            ));
        }
        let (ka, kb) = (kernels_of_a.get(name), kernels_of_b.get(name));
        if ka != kb {
            changes.push(format!(
                "kernels {} -> {}",
                list(ka.into_iter().flatten().copied()),
                list(kb.into_iter().flatten().copied())
            ));
        }
        if !changes.is_empty() {
            out.push(format!("`{name}`: {}", changes.join("; ")));
        }
    }
    for row in rows_before {
        if ops_a.contains_key(row.name.as_str()) && !ops_b.contains_key(row.name.as_str()) {
            out.push(format!("operation `{}` is gone", row.name));
        }
    }

    let images_a: BTreeMap<u32, (&str, &str)> = before
        .tiles
        .iter()
        .map(|t| (t.tile, (t.code_hash.as_str(), t.data_hash.as_str())))
        .collect();
    let images_b: BTreeMap<u32, (&str, &str)> = after
        .tiles
        .iter()
        .map(|t| (t.tile, (t.code_hash.as_str(), t.data_hash.as_str())))
        .collect();
    let (mut code, mut data) = (0, 0);
    for (tile, (c, d)) in &images_b {
        if let Some((c0, d0)) = images_a.get(tile) {
            code += usize::from(c != c0);
            data += usize::from(d != d0);
        }
    }
    let new_tiles = images_b
        .keys()
        .filter(|t| !images_a.contains_key(t))
        .count();
    let gone_tiles = images_a
        .keys()
        .filter(|t| !images_b.contains_key(t))
        .count();
    out.push(format!(
        "tile images: {} tiles, code changed on {code}, data on {data}{}{}",
        images_b.len(),
        if new_tiles > 0 {
            format!(", {new_tiles} tiles newly used")
        } else {
            String::new()
        },
        if gone_tiles > 0 {
            format!(", {gone_tiles} tiles no longer used")
        } else {
            String::new()
        },
    ));

    let hashes_a: BTreeSet<&str> = a.exchanges.iter().map(|e| e.hash.as_str()).collect();
    let bytes = |e: &[super::ExchangeFingerprint]| e.iter().map(|x| x.bytes).sum::<u64>();
    let changed: Vec<&str> = b
        .exchanges
        .iter()
        .filter(|e| !hashes_a.contains(e.hash.as_str()))
        .map(|e| e.label.as_str())
        .collect();
    let unchanged = b.exchanges.len() - changed.len();
    if a.exchanges.is_empty() && b.exchanges.is_empty() {
        out.push("exchange programs: none in either build".into());
    } else {
        out.push(format!(
            "exchange programs: {} -> {} ({unchanged} unchanged{}), {} -> {} bytes delivered",
            a.exchanges.len(),
            b.exchanges.len(),
            if changed.is_empty() {
                String::new()
            } else {
                format!(
                    "; new or changed: {}",
                    list(changed.iter().take(6).copied())
                ) + if changed.len() > 6 { ", ..." } else { "" }
            },
            bytes(&a.exchanges),
            bytes(&b.exchanges)
        ));
    }

    let peaks = |p: &Profile| -> BTreeMap<u32, u64> {
        p.tiles
            .iter()
            .map(|t| (t.tile, analysis::peak_memory(t).0))
            .collect()
    };
    let (peak_a, peak_b) = (peaks(before), peaks(after));
    let max_a = peak_a.values().max().copied().unwrap_or(0);
    let max_b = peak_b.values().max().copied().unwrap_or(0);
    let moved = peak_b
        .iter()
        .filter(|(tile, bytes)| peak_a.get(tile).is_some_and(|a| a != *bytes))
        .count();
    out.push(format!(
        "placement: fullest tile {max_a} -> {max_b} bytes; peak memory changed on {moved} {}",
        if moved == 1 { "tile" } else { "tiles" }
    ));
    out
}

fn percent(before: u64, after: u64) -> String {
    if before == 0 {
        return "-".into();
    }
    format!("{:+.1} %", 100.0 * (after as f64 / before as f64 - 1.0))
}

fn cell(value: Option<u64>) -> String {
    value.map_or("-".into(), |v| v.to_string())
}

/// The text `ipub profile diff` prints.
pub(crate) fn text(diff: &Diff, top: usize) -> String {
    let mut out = String::new();
    let (a, b) = diff.total;
    let _ = writeln!(
        out,
        "{} -> {}: {a} -> {b} cycles ({:+}, {}); estimated {} -> {}",
        diff.before_name,
        diff.after_name,
        b as i64 - a as i64,
        percent(a, b),
        diff.estimated.0,
        diff.estimated.1
    );
    let _ = writeln!(out, "\nby step kind");
    for kind in StepKind::ALL {
        let (a, b) = (diff.kinds.0.get(kind), diff.kinds.1.get(kind));
        let _ = writeln!(
            out,
            "  {:<10} {a:>12} {b:>12} {:>+10} {:>9}",
            kind.name(),
            b as i64 - a as i64,
            percent(a, b)
        );
    }
    let _ = writeln!(
        out,
        "\nby operation (largest change first){:>7} {:>12} {:>10}",
        "before", "after", "change"
    );
    for op in diff.ops.iter().take(top) {
        let (a, b) = op.cycles();
        let _ = writeln!(
            out,
            "  {:<28} {:>12} {:>12} {:>+10} {:>9}",
            op.name,
            cell(op.before.as_ref().map(OpRow::total)),
            cell(op.after.as_ref().map(OpRow::total)),
            op.delta(),
            percent(a, b)
        );
    }
    let _ = writeln!(
        out,
        "\ntiles whose busy time changed most{:>8} {:>12} {:>10}",
        "before", "after", "change"
    );
    for tile in diff.tiles.iter().take(top).filter(|t| t.delta() != 0) {
        let (a, b) = tile.busy_cycles();
        let _ = writeln!(
            out,
            "  tile {:>4} {:>29} {:>12} {:>+10}{}",
            tile.tile,
            a,
            b,
            tile.delta(),
            tile.note().map_or(String::new(), |n| format!("  ({n})"))
        );
    }
    let _ = writeln!(out, "\nwhat the build changed");
    for line in &diff.build {
        let _ = writeln!(out, "  {line}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::tests::sample;
    use super::*;
    use expect_test::expect;

    #[test]
    fn diffs_show_deltas_and_what_the_build_changed() {
        let before = sample();
        let mut after = sample();
        // Softmax got faster on tile 1 and runs a new kernel; qkv moved.
        after.steps[3].cycles = 800;
        after.steps[3].tiles[1].busy_cycles = 800;
        after.steps[3].tiles[0].busy_cycles = 700;
        for tile in &mut after.steps[3].tiles {
            tile.kernel = Some("softmax_f16_fast".into());
        }
        after.total_cycles = 2800;
        let build = after.build.as_mut().expect("build");
        build.package_hash = "cd34".into();
        build.kernels[1] = "softmax_f16_fast".into();
        after.ops[1].tiles = 4;
        after.tiles[1].code_hash = "changed".into();
        after.tiles[1].buffers[2].bytes = 32768;
        expect![[r#"
            a.json -> b.json: 3000 -> 2800 cycles (-200, -6.7 %); estimated 2800 -> 2800

            by step kind
              compute            2200         2000       -200    -9.1 %
              exchange            200          200         +0    +0.0 %
              sync                600          600         +0    +0.0 %
              host                  0            0         +0         -

            by operation (largest change first) before        after     change
              softmax                              1800         1600       -200   -11.1 %
              qkv                                  1200         1200         +0    +0.0 %

            tiles whose busy time changed most  before        after     change
              tile    0                          2300         2100       -200
              tile    1                          2150         1950       -200

            what the build changed
              kernels added: `softmax_f16_fast`
              kernels no longer run: `softmax_f16`
              `softmax`: 2 -> 4 tiles; kernels `softmax_f16` -> `softmax_f16_fast`
              tile images: 2 tiles, code changed on 1, data on 0
              exchange programs: 1 -> 1 (1 unchanged), 1000 -> 1000 bytes delivered
              placement: fullest tile 30720 -> 47104 bytes; peak memory changed on 1 tile
        "#]]
        .assert_eq(&text(&diff(&before, &after, ("a.json", "b.json")), 5));
    }

    #[test]
    fn the_same_package_twice_says_so() {
        let profile = sample();
        let diff = diff(&profile, &profile, ("a", "b"));
        assert_eq!(
            diff.build,
            ["the same package ran both times: only the measurement can differ"]
        );
        assert!(diff.ops.iter().all(|o| o.delta() == 0));
    }
}
