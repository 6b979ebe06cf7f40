//! Legalization between validation and planning: removing work nobody
//! reads.
//!
//! An operation is kept when its result is a program output, a checked
//! output, a repeat's carried result, or an input of a kept operation;
//! every other operation is removed before planning, so it costs no tiles,
//! memory or cycles. Tensors are never renumbered (an unread tensor simply
//! gets no buffer), so tensor ids, bindings and the host reference are the
//! same before and after; only operation ids, and the repeat bodies that
//! list them, are renumbered.

use crate::graph::{Graph, OpId};

/// The graph without unread operations, and the removed operations' names
/// in op order. A graph with nothing to remove comes back equal.
pub fn eliminate_unread(graph: &Graph) -> (Graph, Vec<String>) {
    let mut read = vec![false; graph.tensors.len()];
    let mark = |read: &mut Vec<bool>, id: crate::graph::TensorId| {
        if let Some(slot) = read.get_mut(id.0 as usize) {
            *slot = true;
        }
    };
    for &t in graph.outputs.iter().chain(&graph.check.outputs) {
        mark(&mut read, t);
    }
    for repeat in &graph.repeats {
        mark(&mut read, repeat.carry_out);
    }
    // Ops are in execution order and a repeat's only backward edge (its
    // carried result) is marked above, so one backward pass sees every
    // reader before the operation it reads from.
    let mut kept = vec![false; graph.ops.len()];
    for (i, op) in graph.ops.iter().enumerate().rev() {
        if read.get(op.output.0 as usize).copied().unwrap_or(false) {
            kept[i] = true;
            for &input in &op.inputs {
                mark(&mut read, input);
            }
        }
    }
    if kept.iter().all(|&k| k) {
        return (graph.clone(), Vec::new());
    }
    let mut renumbered = vec![None; graph.ops.len()];
    let mut legal = graph.clone();
    legal.ops.clear();
    let mut removed = Vec::new();
    for (i, op) in graph.ops.iter().enumerate() {
        if kept[i] {
            renumbered[i] = Some(OpId(legal.ops.len() as u32));
            legal.ops.push(op.clone());
        } else {
            removed.push(op.name.clone());
        }
    }
    for repeat in &mut legal.repeats {
        repeat.body = repeat
            .body
            .iter()
            .filter_map(|op| renumbered.get(op.0 as usize).copied().flatten())
            .collect();
    }
    (legal, removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::{Database, Db, MemoryFs};
    use camino::Utf8Path;
    use std::sync::Arc;

    fn validated(text: &str) -> Graph {
        let fs = MemoryFs::new();
        fs.write("p.toml", text);
        let db = Database::new(Arc::new(fs));
        let file = db.file(Utf8Path::new("p.toml"));
        let result = crate::project::project_graph(&db, file);
        (*result.graph.clone().expect("valid project")).clone()
    }

    const PROJECT: &str = r#"
[project]
name = "unread"
target = "ipu21"
tiles = 4
seed = 1

[[tensor]]
name = "x"
shape = [8, 16]
dtype = "f16"
role = "input"

[[repeat]]
name = "looped"
count = 2
input = "x"
carry = "h"
result = "h2"

[[repeat.op]]
name = "dead_in_loop"
op = "gelu"
inputs = ["h"]

[[repeat.op]]
name = "h2"
op = "gelu"
inputs = ["h"]

[[op]]
name = "a"
op = "gelu"
inputs = ["looped"]

[[op]]
name = "dead1"
op = "gelu"
inputs = ["a"]

[[op]]
name = "dead2"
op = "gelu"
inputs = ["dead1"]

[check]
reference_precision = "device"
min_cosine_similarity = 0.99
max_abs_error = 0.1
outputs = ["a"]
"#;

    #[test]
    fn unread_chains_are_removed_and_outputs_and_carries_kept() {
        let graph = validated(PROJECT);
        let (legal, removed) = eliminate_unread(&graph);
        assert_eq!(removed, ["dead_in_loop", "dead1", "dead2"]);
        let names: Vec<&str> = legal.ops.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["h2", "a"]);
        assert_eq!(legal.repeats[0].body, [OpId(0)]);
        assert_eq!(legal.tensors, graph.tensors, "tensor ids are stable");
    }

    #[test]
    fn a_graph_with_nothing_unread_is_unchanged() {
        let graph =
            validated(&PROJECT.replace("outputs = [\"a\"]", "outputs = [\"a\", \"dead2\"]"));
        let graph = {
            // dead_in_loop is still unread; drop it by hand to get a graph
            // with nothing to remove.
            eliminate_unread(&graph).0
        };
        let (legal, removed) = eliminate_unread(&graph);
        assert!(removed.is_empty());
        assert_eq!(legal, graph);
    }
}
