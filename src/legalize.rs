//! Legalization between validation and planning: what a project may say,
//! rewritten into what the planner, lowering and the kernels handle.
//!
//! - **Unread work.** An operation is kept when its result is a program
//!   output, a checked output, a repeat's carried result, or an input of a
//!   kept operation; every other operation is removed before planning, so
//!   it costs no tiles, memory or cycles.
//! - **Implicit casts.** A matmul with one f16 and one FP8 operand reads
//!   the f16 operand converted to the other's FP8 format with scale 0 (the
//!   project format's rule). The AMP multiplies two operands of one format,
//!   so legalization inserts the cast as an operation of its own,
//!   `<matmul>.cast_a` (or `.cast_b`), right before the matmul (inside the
//!   repeat body when the matmul is in one).
//!
//! - **f32 results.** A matmul with an f32 result runs the GEMM that
//!   carries f32 partials, whose AMP step takes f16 inputs only; each FP8
//!   operand is read converted to f16 (its scale applied), and legalization
//!   inserts that cast the same way.
//!
//! - **Batched products with a shared matrix.** A matmul of a batched
//!   `[..., m, k]` by a plain `[k, n]` is one product of `[batches * m, k]`
//!   by `[k, n]`: legalization reshapes the left operand
//!   (`<matmul>.rows`), lets the matmul write `[batches * m, n]`
//!   (`<matmul>.flat`) and reshapes that to the result the project names
//!   (`<matmul>.batches`, writing the original result). The planner then
//!   shares the matrix between all rows; as a batched product it would
//!   lay a copy of it out for every batch. A product whose result an
//!   elementwise operation or a cast reads stays batched: fusion merges
//!   that reader into the product only when it reads the product's result
//!   itself, not a view of it, and one pass over the result saves more than
//!   the shared matrix for the usual few batches.
//!
//! Existing tensors keep their ids (an inserted cast's result is appended,
//! an unread tensor simply gets no buffer), so bindings and the host
//! reference, which evaluates the project as written, line up with the
//! program; operation ids, and the repeat bodies that list them, are
//! renumbered.

use crate::graph::{DType, Graph, Op, OpId, OpKind, Role, Tensor, TensorId};

/// Unread operations removed, products of a shared matrix flattened, then
/// implicit casts inserted: the graph every phase after validation works
/// on, with what changed for the log (the removed and the inserted
/// operations' names).
pub(crate) fn legalize(graph: &Graph) -> (Graph, Vec<String>, Vec<String>) {
    let (without_unread, removed) = eliminate_unread(graph);
    let (flat, mut inserted) = flatten_shared_products(&without_unread);
    let (legal, casts) = insert_casts(&flat);
    inserted.extend(casts);
    (legal, removed, inserted)
}

/// `graph` with each operation replaced by the operations `replace` makes
/// of it (the operation itself among them), which may add tensors to the
/// list it is given; repeat bodies list the replacements in their places.
fn rewrite(graph: &Graph, mut replace: impl FnMut(&mut Vec<Tensor>, Op) -> Vec<Op>) -> Graph {
    let mut legal = graph.clone();
    legal.ops.clear();
    let mut renumbered: Vec<Vec<OpId>> = vec![Vec::new(); graph.ops.len()];
    for (i, op) in graph.ops.iter().enumerate() {
        for op in replace(&mut legal.tensors, op.clone()) {
            renumbered[i].push(OpId(legal.ops.len() as u32));
            legal.ops.push(op);
        }
    }
    for repeat in &mut legal.repeats {
        repeat.body = repeat
            .body
            .iter()
            .flat_map(|op| renumbered[op.0 as usize].iter().copied())
            .collect();
    }
    legal
}

/// Rewrites every matmul of a batched left operand by a 2-D right one as
/// one product of the rows (see the module's documentation); returns the
/// new graph and the inserted operations' names.
fn flatten_shared_products(graph: &Graph) -> (Graph, Vec<String>) {
    // Whether an operation fusion could merge into a product reads `t`.
    let fusable_reader = |t: TensorId| {
        graph.ops.iter().any(|reader| {
            reader.inputs.contains(&t)
                && (reader.kind == OpKind::Cast
                    || crate::graph::EpilogueStep::of(&reader.kind).is_some())
        })
    };
    let mut inserted = Vec::new();
    let legal = rewrite(graph, |tensors, mut op| {
        let shared = matches!(op.kind, OpKind::Matmul { .. })
            && graph.tensor(op.inputs[0]).shape.len() > 2
            && graph.tensor(op.inputs[1]).shape.len() == 2
            && !fusable_reader(op.output);
        if !shared {
            return vec![op];
        }
        let lhs = graph.tensor(op.inputs[0]);
        let result = graph.tensor(op.output);
        let rows: usize = lhs.shape[..lhs.shape.len() - 1].iter().product();
        let (k, n) = (
            lhs.shape[lhs.shape.len() - 1],
            result.shape[result.shape.len() - 1],
        );
        // A new tensor shaped `shape`, of `like`'s type, where the product
        // lives (its repeat's body, if any).
        let mut tensor = |name: String, shape: Vec<usize>, like: &Tensor| {
            let id = TensorId(tensors.len() as u32);
            tensors.push(Tensor {
                name,
                shape,
                role: Role::Activation,
                init: None,
                repeat: result.repeat,
                ..like.clone()
            });
            id
        };
        let rows_of_lhs = tensor(format!("{}.rows", op.name), vec![rows, k], lhs);
        let flat = tensor(format!("{}.flat", op.name), vec![rows, n], result);
        let reshape = |name: String, input: TensorId, output: TensorId| Op {
            name,
            kind: OpKind::Reshape,
            inputs: vec![input],
            output,
        };
        let rows_view = reshape(format!("{}.rows", op.name), op.inputs[0], rows_of_lhs);
        let batches = reshape(format!("{}.batches", op.name), flat, op.output);
        inserted.extend([rows_view.name.clone(), batches.name.clone()]);
        op.inputs[0] = rows_of_lhs;
        op.output = flat;
        vec![rows_view, op, batches]
    });
    (legal, inserted)
}

/// Inserts the cast of every mixed f16/FP8 matmul; returns the new graph
/// and the inserted operations' names.
pub(crate) fn insert_casts(graph: &Graph) -> (Graph, Vec<String>) {
    let mut inserted = Vec::new();
    let legal = rewrite(graph, |tensors, mut op| {
        let mut ops = Vec::new();
        if let OpKind::Matmul { .. } = op.kind {
            let dtypes: Vec<DType> = op.inputs.iter().map(|&t| graph.tensor(t).dtype).collect();
            let fp8 = dtypes.iter().copied().find(|d| d.is_fp8());
            let f32_result = graph.tensor(op.output).dtype == DType::F32;
            for (side, input) in op.inputs.iter_mut().enumerate() {
                let source = graph.tensor(*input);
                // An f32 result reads both operands as f16 (the AMP carries
                // f32 partials only with f16 inputs); otherwise an f16
                // operand beside an FP8 one is read in that FP8 format.
                let cast_to = if f32_result {
                    Some(DType::F16).filter(|_| source.dtype.is_fp8())
                } else {
                    fp8.filter(|_| source.dtype == DType::F16)
                };
                let Some(format) = cast_to else {
                    continue;
                };
                let name = format!("{}.cast_{}", op.name, if side == 0 { 'a' } else { 'b' });
                let output = TensorId(tensors.len() as u32);
                tensors.push(Tensor {
                    name: name.clone(),
                    shape: source.shape.clone(),
                    dtype: format,
                    scale: 0,
                    role: Role::Activation,
                    init: None,
                    repeat: None,
                    written_name: None,
                });
                ops.push(Op {
                    name: name.clone(),
                    kind: OpKind::Cast,
                    inputs: vec![*input],
                    output,
                });
                *input = output;
                inserted.push(name);
            }
        }
        ops.push(op);
        ops
    });
    (legal, inserted)
}

/// The graph without unread operations, and the removed operations' names
/// in op order. A graph with nothing to remove comes back equal.
pub(crate) fn eliminate_unread(graph: &Graph) -> (Graph, Vec<String>) {
    let mut read = vec![false; graph.tensors.len()];
    let mark = |read: &mut Vec<bool>, id: crate::graph::TensorId| {
        if let Some(slot) = read.get_mut(id.0 as usize) {
            *slot = true;
        }
    };
    for &t in graph.outputs.iter().chain(&graph.check.outputs) {
        mark(&mut read, t);
    }
    // A repeat always runs: its carried result and the tensor it starts
    // from are read.
    for repeat in &graph.repeats {
        mark(&mut read, repeat.carry_out);
        mark(&mut read, repeat.init);
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
    use crate::db::{Database, Db};
    use crate::vfs::MemoryFs;
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

    /// A batched product of a shared matrix becomes one product of its
    /// rows between two reshapes; with a reader fusion could merge, it
    /// stays batched.
    #[test]
    fn a_batched_product_of_a_shared_matrix_becomes_one_of_rows() {
        let text = r#"
[project]
name = "rows"
target = "ipu21"
tiles = 1
seed = 1

[[tensor]]
name = "x"
shape = [5, 2, 17]
dtype = "f16"
role = "input"

[[tensor]]
name = "w"
shape = [17, 3]
dtype = "f16"
role = "weight"

[[op]]
name = "y"
op = "matmul"
inputs = ["x", "w"]
dtype = "f16"

[check]
reference_precision = "device"
min_cosine_similarity = 0.99
max_abs_error = 0.05
outputs = ["y"]
"#;
        let graph = validated(text);
        let (legal, _, inserted) = legalize(&graph);
        assert_eq!(inserted, ["y.rows", "y.batches"]);
        let ops: Vec<String> = legal
            .ops
            .iter()
            .map(|op| {
                let shape = |t: TensorId| format!("{:?}", legal.tensor(t).shape);
                let inputs: Vec<String> = op.inputs.iter().map(|&t| shape(t)).collect();
                format!(
                    "{} {}({}) -> {}",
                    op.name,
                    op.kind.name(),
                    inputs.join(", "),
                    shape(op.output)
                )
            })
            .collect();
        assert_eq!(
            ops,
            [
                "y.rows reshape([5, 2, 17]) -> [10, 17]",
                "y matmul([10, 17], [17, 3]) -> [10, 3]",
                "y.batches reshape([10, 3]) -> [5, 2, 3]",
            ]
        );
        // The project's result keeps its id, so bindings and the reference
        // line up.
        assert_eq!(legal.ops[2].output, graph.ops[0].output);
        let gelu = text
            .replace("outputs = [\"y\"]", "outputs = [\"g\"]")
            .replace(
                "[check]",
                "[[op]]\nname = \"g\"\nop = \"gelu\"\ninputs = [\"y\"]\ndtype = \"f16\"\n\n[check]",
            );
        let (legal, _, inserted) = legalize(&validated(&gelu));
        assert!(inserted.is_empty(), "{inserted:?}");
        assert_eq!(legal.ops.len(), 2);
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
dtype = "f16"

[[repeat.op]]
name = "h2"
op = "gelu"
inputs = ["h"]
dtype = "f16"

[[op]]
name = "a"
op = "gelu"
inputs = ["looped"]
dtype = "f16"

[[op]]
name = "dead1"
op = "gelu"
inputs = ["a"]
dtype = "f16"

[[op]]
name = "dead2"
op = "gelu"
inputs = ["dead1"]
dtype = "f16"

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
    fn a_mixed_matmul_gets_one_cast_inside_its_repeat() {
        let project = r#"
[project]
name = "mixed"
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

[[repeat.tensor]]
name = "w"
shape = [16, 16]
dtype = "f143"
scale = -4
role = "weight"

[[repeat.op]]
name = "p"
op = "matmul"
inputs = ["h", "w"]
dtype = "f16"

[[repeat.op]]
name = "h2"
op = "add"
inputs = ["h", "p"]
dtype = "f16"

[check]
reference_precision = "device"
min_cosine_similarity = 0.99
max_abs_error = 0.1
outputs = ["looped"]
"#;
        let graph = validated(project);
        let (legal, removed, inserted) = legalize(&graph);
        assert!(removed.is_empty());
        assert_eq!(inserted, ["p.cast_a"]);
        let ops: Vec<String> = legal
            .ops
            .iter()
            .map(|o| {
                let inputs: Vec<&str> = o
                    .inputs
                    .iter()
                    .map(|&t| legal.tensor(t).name.as_str())
                    .collect();
                format!("{} {}({})", o.name, o.kind.name(), inputs.join(", "))
            })
            .collect();
        assert_eq!(
            ops,
            ["p.cast_a cast(h)", "p matmul(p.cast_a, w)", "h2 add(h, p)"]
        );
        assert_eq!(legal.repeats[0].body, [OpId(0), OpId(1), OpId(2)]);
        let cast = legal.tensors.last().expect("the cast's result");
        assert_eq!((cast.dtype, cast.scale), (DType::F143, 0));
        assert_eq!(&legal.tensors[..graph.tensors.len()], &graph.tensors[..]);
        // Nothing left to legalize.
        let (again, _, inserted) = legalize(&legal);
        assert!(inserted.is_empty());
        assert_eq!(again, legal);
        // The reference's own reading of the mixed matmul and the explicit
        // cast agree exactly, at both precisions.
        let mut with_init = graph.clone();
        with_init.tensors[0].init = Some(crate::graph::Init::Normal { std: 1.0 });
        with_init.tensors[1].init = Some(crate::graph::Init::Normal { std: 0.1 });
        let (legal, _, _) = legalize(&with_init);
        for precision in [
            crate::graph::ReferencePrecision::Device,
            crate::graph::ReferencePrecision::F32,
        ] {
            let mixed = crate::reference::evaluate(&with_init, precision).expect("mixed");
            let explicit = crate::reference::evaluate(&legal, precision).expect("explicit");
            let output = with_init.repeats[0].output;
            assert_eq!(mixed.get(output), explicit.get(output), "{precision:?}");
            assert!(mixed
                .get(output)
                .is_some_and(|v| v.iter().any(|x| *x != 0.0)));
        }
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

    #[test]
    fn an_f32_result_reads_its_fp8_operands_as_f16() {
        let project = r#"
[project]
name = "f32-result"
target = "ipu21"
tiles = 4
seed = 1

[[tensor]]
name = "x"
shape = [8, 32]
dtype = "f143"
scale = -2
role = "input"

[[tensor]]
name = "w"
shape = [32, 16]
dtype = "f143"
scale = 1
role = "weight"

[[tensor]]
name = "v"
shape = [16, 16]
dtype = "f152"
role = "weight"

[[op]]
name = "y"
op = "matmul"
inputs = ["x", "w"]
dtype = "f32"

[[op]]
name = "y16"
op = "cast"
inputs = ["y"]
dtype = "f16"

[[op]]
name = "z"
op = "matmul"
inputs = ["y16", "v"]
dtype = "f32"

[check]
reference_precision = "device"
min_cosine_similarity = 0.99
max_abs_error = 0.1
outputs = ["z"]
"#;
        let graph = validated(project);
        let (legal, _, inserted) = legalize(&graph);
        // Both FP8 operands of `y`, and the FP8 operand beside an f16 one
        // of `z` (which an f16 result would instead read as FP8), become
        // f16 with scale 0.
        assert_eq!(inserted, ["y.cast_a", "y.cast_b", "z.cast_b"]);
        for cast in &legal.tensors[graph.tensors.len()..] {
            assert_eq!((cast.dtype, cast.scale), (DType::F16, 0), "{}", cast.name);
        }
        let (again, _, inserted) = legalize(&legal);
        assert!(inserted.is_empty());
        assert_eq!(again, legal);
    }
}
