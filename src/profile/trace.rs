//! The Chrome trace-event export (Perfetto, `chrome://tracing`): one track
//! for the steps, one per tile, and counters for exchange traffic and live
//! memory. Times are in microseconds at the profile's clock.

use super::analysis::step_ops;
use super::{Profile, StepKind};
use serde_json::{json, Value};

/// Live bytes on every tile at each step index, from the placements:
/// `(sum over tiles, fullest tile)` per index up to `steps`.
fn live_memory(profile: &Profile, steps: u32) -> Vec<(u64, u64)> {
    let mut sum = vec![0u64; steps as usize];
    let mut fullest = vec![0u64; steps as usize];
    for tile in &profile.tiles {
        let support: u64 = tile.support.iter().map(|s| u64::from(s.bytes)).sum();
        let mut live = vec![support; steps as usize];
        for buffer in &tile.buffers {
            let last = buffer.last_step.min(steps.saturating_sub(1));
            for slot in live
                .iter_mut()
                .take(last as usize + 1)
                .skip(buffer.first_step as usize)
            {
                *slot += u64::from(buffer.bytes);
            }
        }
        for (i, bytes) in live.into_iter().enumerate() {
            sum[i] += bytes;
            fullest[i] = fullest[i].max(bytes);
        }
    }
    sum.into_iter().zip(fullest).collect()
}

/// Chrome trace-event JSON: a slice per step on the `steps` track, a slice
/// per busy tile per step on the tile's track (a compute slice is named
/// `operation: kernel`), and counters `exchange bytes` (delivered in each
/// exchange step) and `live memory` (all tiles and the fullest tile).
pub(crate) fn chrome_trace(profile: &Profile) -> String {
    let mut events: Vec<Value> = vec![
        json!({"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "steps"}}),
        json!({"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "tiles"}}),
    ];
    let indices = profile
        .steps
        .iter()
        .filter_map(|s| s.index)
        .max()
        .map_or(0, |i| i + 1);
    let memory = live_memory(profile, indices);
    let mut last_memory = None;
    for (step, op) in profile.steps.iter().zip(step_ops(profile)) {
        let start = profile.micros(step.start_cycle);
        let kind = step.kind.name();
        events.push(json!({
            "name": step.label, "cat": kind, "ph": "X", "ts": start,
            "dur": profile.micros(step.cycles), "pid": 0, "tid": "steps",
            "args": {
                "op": op, "iteration": step.iteration, "cycles": step.cycles,
                "estimated cycles": step.estimated_cycles,
            },
        }));
        for tile in &step.tiles {
            let name = match (&tile.kernel, op) {
                (Some(kernel), Some(op)) => format!("{op}: {kernel}"),
                (Some(kernel), None) => kernel.clone(),
                (None, _) => step.label.clone(),
            };
            events.push(json!({
                "name": name, "cat": kind, "ph": "X", "ts": start,
                "dur": profile.micros(tile.busy_cycles), "pid": 1, "tid": tile.tile,
                "args": {
                    "op": op, "kernel": tile.kernel, "cycles": tile.busy_cycles,
                    "estimated cycles": tile.estimated_cycles,
                    "instructions": tile.instructions,
                    "bytes in": tile.bytes_in, "bytes out": tile.bytes_out,
                },
            }));
        }
        if step.kind == StepKind::Exchange {
            let bytes: u64 = step.tiles.iter().map(|t| t.bytes_in).sum();
            events.push(json!({
                "name": "exchange bytes", "ph": "C", "ts": start, "pid": 0,
                "args": {"delivered": bytes},
            }));
            let end = profile.micros(step.start_cycle + step.cycles);
            events.push(json!({
                "name": "exchange bytes", "ph": "C", "ts": end, "pid": 0,
                "args": {"delivered": 0},
            }));
        }
        if let Some(&(all, fullest)) = step.index.and_then(|i| memory.get(i as usize)) {
            if last_memory != Some((all, fullest)) {
                last_memory = Some((all, fullest));
                events.push(json!({
                    "name": "live memory", "ph": "C", "ts": start, "pid": 0,
                    "args": {"all tiles": all, "fullest tile": fullest},
                }));
            }
        }
    }
    json!({ "traceEvents": events, "displayTimeUnit": "ns" }).to_string()
}

#[cfg(test)]
mod tests {
    use super::super::tests::sample;
    use super::*;

    #[test]
    fn chrome_traces_name_kernel_runs_by_operation_and_count_bytes_and_memory() {
        let trace: Value = serde_json::from_str(&chrome_trace(&sample())).expect("json");
        let events = trace["traceEvents"].as_array().expect("events");
        let slices: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
        assert_eq!(slices.len(), 4 + 6);
        assert_eq!(slices[1]["name"], "qkv: gemm_f8_k64_c16_r4");
        assert_eq!(slices[1]["tid"], 0);
        assert_eq!(slices[1]["args"]["estimated cycles"], 1000);
        let counters: Vec<&Value> = events.iter().filter(|e| e["ph"] == "C").collect();
        let delivered: Vec<&Value> = counters
            .iter()
            .filter(|e| e["name"] == "exchange bytes")
            .map(|e| &e["args"]["delivered"])
            .collect();
        assert_eq!(delivered, [800, 0]);
        // Step 1: code on both tiles, their inputs, weights and activations.
        let memory = counters
            .iter()
            .find(|e| e["name"] == "live memory")
            .expect("a memory counter");
        assert_eq!(memory["args"]["fullest tile"], 4096 + 8192 + 16384 + 2048);
        assert_eq!(
            memory["args"]["all tiles"],
            2 * (4096 + 8192 + 16384 + 2048)
        );
    }
}
