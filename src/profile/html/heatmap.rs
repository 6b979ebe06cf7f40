//! Heatmaps of the chip: every tile of the target as a cell of a grid of
//! [`COLUMNS`] tiles a row (tile `t` at row `t / 64`, column `t % 64`),
//! coloured by busy cycles, peak memory and exchange bytes in and out.
//! Tiles the run does not use are drawn blank, so the grid also shows how
//! much of the chip a program occupies.

use crate::profile::analysis::TileTotals;
use crate::profile::Profile;
use serde_json::{json, Value};

/// Tiles per row of the grid.
pub(super) const COLUMNS: u32 = 64;

/// The metrics drawn, in page order: id, title, unit.
const METRICS: [(&str, &str, &str); 4] = [
    ("busy", "Busy cycles (compute and exchange)", "cycles"),
    ("memory", "Peak memory", "bytes"),
    ("bytes-in", "Exchange bytes in", "bytes"),
    ("bytes-out", "Exchange bytes out", "bytes"),
];

pub(super) fn section() -> String {
    let mut out = String::from(
        "<section id=\"chip\"><h2>Chip</h2>\
         <p class=\"dim\">Every tile of the chip, 64 to a row (tile 0 top left). \
         Grey cells are tiles the program does not use. Hover for a tile's figures; \
         click one to show its memory below.</p><div class=\"heatmaps\">",
    );
    for (id, title, _) in METRICS {
        out.push_str(&format!(
            "<figure class=\"heatmap\"><figcaption>{title}</figcaption>\
             <canvas id=\"heat-{id}\" class=\"heat\"></canvas>\
             <div class=\"scale\" id=\"heat-{id}-scale\"></div></figure>"
        ));
    }
    out.push_str("</div></section>\n");
    out
}

pub(super) fn data(profile: &Profile, tiles: &[TileTotals]) -> Value {
    let count = profile.target().tiles as usize;
    let mut used = vec![0u8; count];
    let mut values = vec![vec![0u64; count]; METRICS.len()];
    for t in tiles {
        let Some(slot) = used.get_mut(t.tile as usize) else {
            continue;
        };
        *slot = 1;
        let i = t.tile as usize;
        values[0][i] = t.compute_cycles + t.exchange_cycles;
        values[1][i] = t.peak_memory;
        values[2][i] = t.bytes_in;
        values[3][i] = t.bytes_out;
    }
    let metrics: Vec<Value> = METRICS
        .iter()
        .zip(values)
        .map(|(&(id, title, unit), values)| {
            json!({"id": id, "title": title, "unit": unit, "values": values})
        })
        .collect();
    json!({
        "columns": COLUMNS,
        "tiles": count,
        "used": used,
        "metrics": metrics,
        "memoryBytes": profile.target().memory.loadable.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::super::super::tests::sample;
    use super::*;
    use crate::profile::analysis::tile_totals;

    #[test]
    fn every_tile_of_the_chip_has_a_cell() {
        let profile = sample();
        let data = data(&profile, &tile_totals(&profile));
        assert_eq!(data["tiles"], 1472);
        assert_eq!(data["used"].as_array().map(Vec::len), Some(1472));
        assert_eq!(data["used"][1], 1);
        assert_eq!(data["used"][2], 0);
        assert_eq!(data["metrics"][0]["values"][0], 2300);
        assert_eq!(data["metrics"][2]["values"][0], 800);
    }
}
