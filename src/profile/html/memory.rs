//! The memory view of one tile: an address map of its buffers over the
//! run's steps (each buffer drawn where it is alive), its support blocks,
//! its largest users and its free space; and a table of the fullest tiles.
//!
//! Columns of the map are the run's steps other than syncs, in order, so a
//! repeat's body appears once per iteration. Buffer rows are `[address,
//! bytes, kind, name, operation, first step, last step]` with kind, name
//! and operation as indices into the tables beside them (-1: none).

use super::summary::Analysis;
use super::thousands;
use crate::profile::analysis::peak_memory;
use crate::profile::{BufferKind, Profile, StepKind};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;

const KINDS: [BufferKind; 5] = [
    BufferKind::Input,
    BufferKind::Weight,
    BufferKind::Activation,
    BufferKind::Operand,
    BufferKind::Partial,
];

pub(super) fn section(profile: &Profile, analysis: &Analysis) -> String {
    let mut out = String::from(
        "<section id=\"memory\"><h2>Memory</h2>\
         <div class=\"controls\"><label>Tile <input type=\"number\" id=\"mem-tile\" min=\"0\"></label>\
         <button id=\"mem-fullest\">Fullest tile</button>\
         <button id=\"mem-bottleneck\">Bottleneck tile</button>\
         <span id=\"mem-title\" class=\"dim\"></span></div>\
         <p class=\"dim\">Addresses up, the run's steps across (syncs left out; a loop's body once per iteration). \
         A buffer is drawn in the steps it must keep its contents; buffers whose lives do not overlap share addresses.</p>\
         <div id=\"mem-legend\" class=\"legend-row\"></div>\
         <div class=\"mem\"><canvas id=\"mem-canvas\"></canvas></div>\
         <div class=\"mem-tables\"><div><h3>Largest users</h3><table id=\"mem-users\" class=\"data\"></table></div>\
         <div><h3>Free space</h3><table id=\"mem-free\" class=\"data\"></table></div></div>",
    );
    if !profile.tiles.is_empty() {
        let capacity = u64::from(profile.target().memory.loadable.len());
        let mut fullest: Vec<_> = analysis.tiles.iter().collect();
        fullest.sort_by(|a, b| b.peak_memory.cmp(&a.peak_memory).then(a.tile.cmp(&b.tile)));
        out.push_str(
            "<h3>Fullest tiles</h3><table class=\"data sortable\"><thead><tr><th>tile</th>\
             <th>peak bytes</th><th>of memory</th><th>free at peak</th></tr></thead><tbody>",
        );
        for t in fullest.iter().take(10) {
            let _ = write!(
                out,
                "<tr><td><a href=\"#memory\" class=\"tile-link\" data-tile=\"{0}\">tile {0}</a></td>\
                 <td>{1}</td><td>{2:.1} %</td><td>{3}</td></tr>",
                t.tile,
                thousands(t.peak_memory),
                100.0 * t.peak_memory as f64 / capacity as f64,
                thousands(capacity.saturating_sub(t.peak_memory))
            );
        }
        out.push_str("</tbody></table>");
    } else {
        out.push_str("<p>This profile records no placement (it was written by an older ipub).</p>");
    }
    out.push_str("</section>\n");
    out
}

/// Strings in first-seen order, each once.
#[derive(Default)]
struct Interner {
    index: BTreeMap<String, i64>,
    names: Vec<String>,
}

impl Interner {
    fn of(&mut self, text: &str) -> i64 {
        if let Some(&i) = self.index.get(text) {
            return i;
        }
        self.names.push(text.to_string());
        let i = self.names.len() as i64 - 1;
        self.index.insert(text.to_string(), i);
        i
    }
}

pub(super) fn data(profile: &Profile) -> Value {
    let memory = profile.target().memory;
    let mut labels = Interner::default();
    let columns: Vec<Value> = profile
        .steps
        .iter()
        .filter(|s| s.kind != StepKind::Sync)
        .filter_map(|s| {
            let index = s.index?;
            let label = labels.of(&s.label);
            Some(json!([
                index,
                s.start_cycle,
                s.cycles,
                label,
                s.kind.name()
            ]))
        })
        .collect();
    let mut names = Interner::default();
    let mut tiles = Map::new();
    let mut fullest = None;
    for tile in &profile.tiles {
        let peak = peak_memory(tile).0;
        if fullest.is_none_or(|(_, bytes)| peak > bytes) {
            fullest = Some((tile.tile, peak));
        }
        let support: Vec<Value> = tile
            .support
            .iter()
            .map(|s| json!([s.kind, s.address, s.bytes]))
            .collect();
        let buffers: Vec<Value> = tile
            .buffers
            .iter()
            .map(|b| {
                let kind = KINDS.iter().position(|&k| k == b.kind).unwrap_or(0);
                let name = names.of(&b.name);
                let op = b.op.as_deref().map_or(-1, |op| names.of(op));
                json!([
                    b.address,
                    b.bytes,
                    kind,
                    name,
                    op,
                    b.first_step,
                    b.last_step
                ])
            })
            .collect();
        tiles.insert(
            tile.tile.to_string(),
            json!({"support": support, "buffers": buffers}),
        );
    }
    json!({
        "base": memory.tile.start,
        "end": memory.tile.end,
        "region1": memory.region1.start,
        "loadableEnd": memory.loadable.end,
        "columns": columns,
        "labels": labels.names,
        "kinds": KINDS.iter().map(|k| k.name()).collect::<Vec<_>>(),
        "names": names.names,
        "tiles": tiles,
        "fullest": fullest.map(|(tile, _)| tile),
    })
}

#[cfg(test)]
mod tests {
    use super::super::super::tests::sample;
    use super::*;

    #[test]
    fn memory_data_name_buffers_through_tables() {
        let data = data(&sample());
        let tile = &data["tiles"]["0"];
        assert_eq!(tile["support"][0], json!(["code", 0x4C000, 4096]));
        let weight = &tile["buffers"][2];
        assert_eq!(weight[2], 1, "a weight");
        let name = weight[3].as_u64().expect("a name index") as usize;
        assert_eq!(data["names"][name], "weight `w`");
        // Columns leave the sync out.
        assert_eq!(data["columns"].as_array().map(Vec::len), Some(3));
    }
}
