//! Casts to FP8 moved before the views that lead to them.
//!
//! A cast is elementwise, so casting the result of a transpose or a
//! reshape equals transposing or reshaping the cast: `cast(view(x))` is
//! `view(cast(x))`. Written after the views, a cast runs in a layout of its
//! own, which its input must first be gathered into (one exchange phase and
//! one sync); moved before them, it sits right after the operation that
//! makes `x`, and folds into it like any other cast ([`super::absorb`]):
//! the views then carry FP8, and their reader gathers the FP8 bytes from
//! the producer's tiles as it gathered the cast's before.

use crate::graph::{Graph, Op, OpKind, Role, Tensor, TensorId};

/// `graph` with every cast to FP8 that views lead to moved before them,
/// and, by op index, the f16 view results each move leaves unproduced
/// (the intermediates of the fusion that follows).
///
/// A cast moves when its input is reached from an operation whose f16
/// result a cast folds into (`folds`), through transposes and reshapes
/// only, each result read once and all in the cast's repeat scope. The
/// operations keep their places in op order, each one moved up the chain
/// by one: the first view's place takes the cast (reading the producer's
/// result), each later place the view before it, and the cast's place the
/// last view, which writes the cast's own result. Between those places no
/// operation reads the chain's results, so the order stays topological and
/// the repeat bodies stay as they are. The new FP8 results of the cast and
/// the views before the last are new tensors, named after the f16 tensors
/// they replace, with the cast's name appended.
pub(super) fn casts_before_views(
    graph: &Graph,
    readers: &[usize],
    scope: &[Option<usize>],
    folds: &dyn Fn(&Op) -> bool,
) -> (Graph, Vec<Vec<TensorId>>) {
    let mut producer = vec![None; graph.tensors.len()];
    for (i, op) in graph.ops.iter().enumerate() {
        producer[op.output.0 as usize] = Some(i);
    }
    let mut moved = graph.clone();
    let mut unproduced = vec![Vec::new(); graph.ops.len()];
    for (c, cast) in graph.ops.iter().enumerate() {
        let output = graph.tensor(cast.output);
        if !matches!(cast.kind, OpKind::Cast) || !output.dtype.is_fp8() {
            continue;
        }
        // The views from the cast's input back to the producer, last first.
        let mut views = Vec::new();
        let mut tensor = cast.inputs[0];
        let root = loop {
            let Some(p) = producer[tensor.0 as usize] else {
                break None;
            };
            if readers[tensor.0 as usize] != 1 || scope[p] != scope[c] {
                break None;
            }
            let op = &graph.ops[p];
            if !matches!(op.kind, OpKind::Transpose { .. } | OpKind::Reshape) {
                break Some(op);
            }
            views.push(p);
            tensor = op.inputs[0];
        };
        let Some(root) = root.filter(|&op| !views.is_empty() && folds(op)) else {
            continue;
        };
        views.reverse();
        // The FP8 tensors in place of the f16 results before the cast's.
        let mut fp8 = |f16: TensorId| {
            let id = TensorId(moved.tensors.len() as u32);
            let tensor = graph.tensor(f16);
            moved.tensors.push(Tensor {
                name: format!("{}+{}", tensor.name, cast.name),
                shape: tensor.shape.clone(),
                dtype: output.dtype,
                scale: output.scale,
                role: Role::Activation,
                init: None,
                repeat: None,
                written_name: None,
            });
            id
        };
        // Each operation of the chain one place later: the cast at the
        // first view's, each view at the next one's, the last at the cast's.
        let places = views.iter().skip(1).copied().chain([c]);
        let mut written = fp8(root.output);
        moved.ops[views[0]] = Op {
            inputs: vec![root.output],
            output: written,
            ..cast.clone()
        };
        for (&view, place) in views.iter().zip(places) {
            let view = &graph.ops[view];
            let input = written;
            written = match place == c {
                true => cast.output,
                false => fp8(view.output),
            };
            moved.ops[place] = Op {
                inputs: vec![input],
                output: written,
                ..view.clone()
            };
            unproduced[views[0]].push(view.output);
        }
    }
    (moved, unproduced)
}
