//! The timeline: a row for the run's steps, then rows of tiles in groups
//! that expand into one row per tile; steps coloured by kind and
//! operation, an axis in cycles and microseconds, hover details, and the
//! critical path (the tile that set each step's length) marked.
//!
//! The data are columns per step (`steps`) and, per step, parallel arrays
//! of the tiles that took part: ids `t`, busy cycles `b`, kernel indices
//! `k`, estimates `e` (-1 when unknown) and exchange bytes `i` and `o`.
//! Arrays that would hold nothing are left out.

use crate::profile::analysis::step_ops;
use crate::profile::{Profile, StepKind};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

pub(super) fn section() -> String {
    "<section id=\"timeline\"><h2>Timeline</h2>\
     <p class=\"dim\">Scroll to zoom, drag to pan, double-click a step to zoom to it. \
     Click a group of tiles to expand it. Bars are busy time; the rest of a step the tile waits. \
     A red mark shows the tile that set the step's length: the critical path.</p>\
     <div class=\"controls\"><button id=\"tl-reset\">Reset zoom</button>\
     <button id=\"tl-expand\">Expand all</button><button id=\"tl-collapse\">Collapse all</button>\
     <label><input type=\"checkbox\" id=\"tl-critical\"> Dim all but the critical path</label></div>\
     <div id=\"tl-legend\" class=\"legend-row\"></div>\
     <div class=\"tl\"><div class=\"tl-corner\">cycles<br>µs</div><canvas id=\"tl-axis\" height=\"36\"></canvas>\
     <div id=\"tl-labels\"></div><div class=\"tl-canvas-wrap\"><canvas id=\"tl-canvas\"></canvas></div></div>\
     </section>\n"
        .to_string()
}

/// Strings in first-seen order, each once.
#[derive(Default)]
struct Table {
    index: BTreeMap<String, usize>,
    names: Vec<String>,
}

impl Table {
    fn of(&mut self, name: &str) -> i64 {
        if let Some(&i) = self.index.get(name) {
            return i as i64;
        }
        self.names.push(name.to_string());
        self.index.insert(name.to_string(), self.names.len() - 1);
        (self.names.len() - 1) as i64
    }
}

pub(super) fn data(profile: &Profile) -> Value {
    let mut labels = Table::default();
    let mut ops = Table::default();
    let mut kernels = Table::default();
    // Operations in program order first, so their colours follow the program.
    for op in &profile.ops {
        ops.of(&op.name);
    }
    let mut steps = Vec::with_capacity(profile.steps.len());
    let mut activity = Vec::with_capacity(profile.steps.len());
    let mut tiles: Vec<u32> = Vec::new();
    for (step, op) in profile.steps.iter().zip(step_ops(profile)) {
        steps.push(json!([
            step.kind.name(),
            labels.of(&step.label),
            op.map_or(-1, |o| ops.of(o)),
            step.iteration.map_or(-1, i64::from),
            step.start_cycle,
            step.cycles,
            step.estimated_cycles.map_or(-1, |e| e as i64),
        ]));
        let mut columns = Map::new();
        let ids: Vec<u32> = step.tiles.iter().map(|t| t.tile).collect();
        tiles.extend(&ids);
        columns.insert("t".into(), json!(ids));
        columns.insert(
            "b".into(),
            json!(step.tiles.iter().map(|t| t.busy_cycles).collect::<Vec<_>>()),
        );
        if step.tiles.iter().any(|t| t.kernel.is_some()) {
            let k: Vec<i64> = step
                .tiles
                .iter()
                .map(|t| t.kernel.as_deref().map_or(-1, |k| kernels.of(k)))
                .collect();
            columns.insert("k".into(), json!(k));
        }
        if step.tiles.iter().any(|t| t.estimated_cycles.is_some()) {
            let e: Vec<i64> = step
                .tiles
                .iter()
                .map(|t| t.estimated_cycles.map_or(-1, |e| e as i64))
                .collect();
            columns.insert("e".into(), json!(e));
        }
        if step.tiles.iter().any(|t| t.bytes_in > 0 || t.bytes_out > 0) {
            let i: Vec<u64> = step.tiles.iter().map(|t| t.bytes_in).collect();
            let o: Vec<u64> = step.tiles.iter().map(|t| t.bytes_out).collect();
            columns.insert("i".into(), json!(i));
            columns.insert("o".into(), json!(o));
        }
        activity.push(Value::Object(columns));
    }
    tiles.sort_unstable();
    tiles.dedup();
    let colours = super::op_colours(profile);
    let op_colours: Vec<&str> = ops
        .names
        .iter()
        .map(|op| {
            colours
                .get(op)
                .map_or(super::kind_colour(StepKind::Compute), String::as_str)
        })
        .collect();
    let kinds: Vec<&str> = ops
        .names
        .iter()
        .map(|name| {
            profile
                .ops
                .iter()
                .find(|o| &o.name == name)
                .map_or("", |o| o.kind.as_str())
        })
        .collect();
    json!({
        "labels": labels.names,
        "ops": ops.names,
        "opColors": op_colours,
        "opKinds": kinds,
        "kernels": kernels.names,
        "steps": steps,
        "activity": activity,
        "tiles": tiles,
    })
}

#[cfg(test)]
mod tests {
    use super::super::super::tests::sample;
    use super::*;

    #[test]
    fn timeline_data_are_columns_per_step() {
        let data = data(&sample());
        assert_eq!(data["tiles"], json!([0, 1]));
        assert_eq!(data["ops"], json!(["qkv", "softmax"]));
        // The sync belongs to the softmax exchange after it.
        assert_eq!(data["steps"][1], json!(["sync", 1, 1, -1, 1200, 600, 600]));
        assert_eq!(data["activity"][0]["b"], json!([1200, 1100]));
        assert_eq!(data["activity"][0]["e"], json!([1000, 1000]));
        assert_eq!(data["activity"][2]["i"], json!([800, 0]));
        assert!(data["activity"][1].get("k").is_none());
    }
}
