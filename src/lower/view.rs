//! Views: how an index into a view tensor maps to an element of the
//! materialised tensor it views.
//!
//! Transposes, reshapes and slices are views in the graph; operands that a kernel
//! reads broadcast (a bias added to every row, a 2-D right operand shared by
//! every batch of a matrix product) are views too. None of them moves data
//! by itself: exchange lowering maps every slot a kernel reads through the
//! view to the element that holds it.

use super::layout::flat_index;
use crate::graph::{Graph, OpKind, TensorId, MAX_RANK};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
enum Step {
    /// `out = permute(in, perm)`: `out[d] = in[perm[d]]`.
    Transpose {
        perm: Vec<usize>,
        in_shape: Vec<usize>,
    },
    /// Same flat order, other shape.
    Reshape { in_shape: Vec<usize> },
    /// NumPy broadcasting from `in_shape` (right-aligned) to the view shape.
    Broadcast { in_shape: Vec<usize> },
    /// `out[.., i, ..] = in[.., start + i, ..]` along `axis` (same rank).
    Slice {
        axis: usize,
        start: usize,
        in_shape: Vec<usize>,
    },
}

/// A chain of views from a tensor back to the materialised tensor under it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct View {
    /// The materialised tensor.
    pub base: TensorId,
    pub base_shape: Vec<usize>,
    /// The shape indices are given in.
    pub shape: Vec<usize>,
    /// Outermost (closest to the view) first.
    steps: Vec<Step>,
}

impl View {
    /// Follows transposes, reshapes and slices from `tensor` back to the tensor that
    /// holds the data.
    pub(super) fn of(graph: &Graph, tensor: TensorId) -> View {
        let shape = graph.tensor(tensor).shape.clone();
        let mut steps = Vec::new();
        let mut current = tensor;
        while let Some(op) = graph.ops.iter().find(|op| op.output == current) {
            let input = op.inputs[0];
            let in_shape = graph.tensor(input).shape.clone();
            match &op.kind {
                OpKind::Transpose { perm } => steps.push(Step::Transpose {
                    perm: perm.clone(),
                    in_shape,
                }),
                OpKind::Reshape => steps.push(Step::Reshape { in_shape }),
                OpKind::Slice { axis, start } => steps.push(Step::Slice {
                    axis: *axis,
                    start: *start,
                    in_shape,
                }),
                _ => break,
            }
            current = input;
        }
        View {
            base: current,
            base_shape: graph.tensor(current).shape.clone(),
            shape,
            steps,
        }
    }

    /// The tensor `base` itself, indexed in `shape` (which must have the
    /// same element count; it is read in the same flat order).
    pub(super) fn identity(base: TensorId, base_shape: &[usize], shape: &[usize]) -> View {
        let steps = if base_shape == shape {
            Vec::new()
        } else {
            vec![Step::Reshape {
                in_shape: base_shape.to_vec(),
            }]
        };
        View {
            base,
            base_shape: base_shape.to_vec(),
            shape: shape.to_vec(),
            steps,
        }
    }

    /// The view the other way round: its base is this view's tensor
    /// (`tensor`, of this view's shape) and its indices are the base's, so
    /// the host can read a transposed or reshaped output straight from the
    /// buffers of the tensor under it. `None` for a broadcast or a slice,
    /// which have no inverse (validation keeps slices out of the checked
    /// outputs).
    pub(super) fn inverse(&self, tensor: TensorId) -> Option<View> {
        let mut steps = Vec::with_capacity(self.steps.len());
        // Walk from the base outwards; each step's inverse maps the step's
        // output back to its input, so the chain of inverses runs outermost
        // (closest to the base) first once reversed.
        let mut out_shape = self.shape.clone();
        let mut forward = Vec::with_capacity(self.steps.len());
        for step in &self.steps {
            let in_shape = match step {
                Step::Transpose { in_shape, .. } | Step::Reshape { in_shape } => in_shape.clone(),
                Step::Broadcast { .. } | Step::Slice { .. } => return None,
            };
            forward.push((step, std::mem::replace(&mut out_shape, in_shape)));
        }
        for (step, shape_after) in forward.into_iter().rev() {
            steps.push(match step {
                Step::Transpose { perm, .. } => {
                    let mut inverse = vec![0; perm.len()];
                    for (d, &p) in perm.iter().enumerate() {
                        inverse[p] = d;
                    }
                    Step::Transpose {
                        perm: inverse,
                        in_shape: shape_after,
                    }
                }
                _ => Step::Reshape {
                    in_shape: shape_after,
                },
            });
        }
        Some(View {
            base: tensor,
            base_shape: self.shape.clone(),
            shape: self.base_shape.clone(),
            steps,
        })
    }

    /// Views this view reshaped to `shape` (same element count).
    pub(super) fn reshaped(mut self, shape: &[usize]) -> View {
        if self.shape != shape {
            let in_shape = std::mem::replace(&mut self.shape, shape.to_vec());
            self.steps.insert(0, Step::Reshape { in_shape });
        }
        self
    }

    /// Views this view with its last two dimensions swapped (a transposed
    /// right operand read as `[.., inner, cols]`).
    pub(super) fn transposed_last_two(mut self) -> View {
        let rank = self.shape.len();
        let mut perm: Vec<usize> = (0..rank).collect();
        perm.swap(rank - 2, rank - 1);
        let in_shape = self.shape.clone();
        self.shape.swap(rank - 2, rank - 1);
        self.steps.insert(0, Step::Transpose { perm, in_shape });
        self
    }

    /// Views this view broadcast to `shape`.
    pub(super) fn broadcast_to(mut self, shape: &[usize]) -> View {
        if self.shape != shape {
            let in_shape = std::mem::replace(&mut self.shape, shape.to_vec());
            self.steps.insert(0, Step::Broadcast { in_shape });
        }
        self
    }

    /// Whether indices map to the same flat index in the base (no data
    /// movement between the view and its base).
    pub(super) fn is_identity(&self) -> bool {
        self.steps
            .iter()
            .all(|step| matches!(step, Step::Reshape { .. }))
    }

    /// The flat index in the base tensor of `index` (given in `shape`).
    ///
    /// This runs once per element of every gathered operand, so it works on
    /// fixed-size arrays instead of allocating (ranks are at most
    /// [`MAX_RANK`], which the project validator enforces).
    pub(super) fn base_flat_index(&self, index: &[usize]) -> usize {
        if self.steps.is_empty() {
            return flat_index(&self.shape, index);
        }
        let mut current = [0usize; MAX_RANK];
        let mut rank = index.len();
        current[..rank].copy_from_slice(index);
        let mut current_shape: &[usize] = &self.shape;
        for step in &self.steps {
            match step {
                Step::Transpose { perm, in_shape } => {
                    let mut inner = [0usize; MAX_RANK];
                    for (d, &p) in perm.iter().enumerate() {
                        inner[p] = current[d];
                    }
                    current = inner;
                    rank = in_shape.len();
                    current_shape = in_shape;
                }
                Step::Reshape { in_shape } => {
                    let mut flat = flat_index(current_shape, &current[..rank]);
                    rank = in_shape.len();
                    for d in (0..rank).rev() {
                        current[d] = flat % in_shape[d];
                        flat /= in_shape[d];
                    }
                    current_shape = in_shape;
                }
                Step::Broadcast { in_shape } => {
                    let skip = rank - in_shape.len();
                    for (d, &extent) in in_shape.iter().enumerate() {
                        current[d] = if extent == 1 { 0 } else { current[skip + d] };
                    }
                    rank = in_shape.len();
                    current_shape = in_shape;
                }
                Step::Slice {
                    axis,
                    start,
                    in_shape,
                } => {
                    current[*axis] += start;
                    current_shape = in_shape;
                }
            }
        }
        flat_index(current_shape, &current[..rank])
    }
}

impl View {
    /// The base flat indices of the view indices `index + t e(dim)` for
    /// `t` in `0..len` (`e(dim)` steps dimension `dim` by one), as far as
    /// they are affine: returns `(first, stride, count)` with `count >= 1`
    /// (when `len >= 1`) such that the first `count` of them are
    /// `first + t * stride`.
    ///
    /// Transposes and broadcasts keep a run affine; a reshape keeps it
    /// affine until a coordinate of its input shape wraps, which ends the
    /// affine prefix there. Callers ask again from where it stopped, so a
    /// run costs one call per affine piece instead of one per element.
    pub(crate) fn base_run(
        &self,
        index: &[usize],
        dim: usize,
        len: usize,
    ) -> (usize, usize, usize) {
        let rank = index.len();
        if len <= 1 || dim >= rank || rank > MAX_RANK {
            return (self.base_flat_index(index), 0, len.min(1));
        }
        let mut current = [0usize; MAX_RANK];
        let mut delta = [0usize; MAX_RANK];
        current[..rank].copy_from_slice(index);
        delta[dim] = 1;
        let mut rank = rank;
        let mut count = len;
        let mut current_shape: &[usize] = &self.shape;
        for (number, step) in self.steps.iter().enumerate() {
            match step {
                // A reshape keeps the flat order, so one followed by another
                // reshape or by the final flattening changes nothing and
                // must not cut runs where its coordinates wrap.
                Step::Reshape { .. }
                    if matches!(
                        self.steps.get(number + 1),
                        None | Some(Step::Reshape { .. })
                    ) => {}
                Step::Transpose { perm, in_shape } => {
                    let (mut inner, mut inner_delta) = ([0usize; MAX_RANK], [0usize; MAX_RANK]);
                    for (d, &p) in perm.iter().enumerate() {
                        inner[p] = current[d];
                        inner_delta[p] = delta[d];
                    }
                    (current, delta) = (inner, inner_delta);
                    rank = in_shape.len();
                    current_shape = in_shape;
                }
                Step::Reshape { in_shape } => {
                    let mut flat = flat_index(current_shape, &current[..rank]);
                    let step = flat_index(current_shape, &delta[..rank]);
                    rank = in_shape.len();
                    for d in (0..rank).rev() {
                        current[d] = flat % in_shape[d];
                        flat /= in_shape[d];
                        delta[d] = 0;
                    }
                    if step > 0 {
                        // Step the outermost coordinate whose stride divides
                        // the flat step; the inner ones then stay put until
                        // that coordinate leaves its extent.
                        let mut stride = 1;
                        let mut chosen = None;
                        for d in (0..rank).rev() {
                            if in_shape[d] > 1 && step.is_multiple_of(stride) {
                                chosen = Some((d, step / stride));
                            }
                            stride *= in_shape[d];
                            if stride == 0 || stride > step {
                                break;
                            }
                        }
                        match chosen {
                            Some((d, by)) => {
                                delta[d] = by;
                                let room = in_shape[d].saturating_sub(current[d]).div_ceil(by);
                                count = count.min(room);
                            }
                            // Only possible for a tensor without elements.
                            None => count = 1,
                        }
                    }
                    current_shape = in_shape;
                }
                Step::Broadcast { in_shape } => {
                    let skip = rank - in_shape.len();
                    for (d, &extent) in in_shape.iter().enumerate() {
                        if extent == 1 {
                            (current[d], delta[d]) = (0, 0);
                        } else {
                            (current[d], delta[d]) = (current[skip + d], delta[skip + d]);
                        }
                    }
                    rank = in_shape.len();
                    current_shape = in_shape;
                }
                // An offset keeps a run affine with the same step.
                Step::Slice {
                    axis,
                    start,
                    in_shape,
                } => {
                    current[*axis] += start;
                    current_shape = in_shape;
                }
            }
        }
        (
            flat_index(current_shape, &current[..rank]),
            flat_index(current_shape, &delta[..rank]),
            count.max(1),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{Check, DType, Op, ReferencePrecision, Role, Tensor};

    fn tensor(name: &str, shape: &[usize]) -> Tensor {
        Tensor {
            name: name.into(),
            shape: shape.to_vec(),
            dtype: DType::F16,
            scale: 0,
            role: Role::Activation,
            init: None,
            repeat: None,
            written_name: None,
        }
    }

    fn graph() -> Graph {
        // x [4, 6] -> reshape [4, 2, 3] -> transpose (1, 0, 2) -> [2, 4, 3]
        Graph {
            name: "views".into(),
            target: crate::target::TargetId::Ipu21,
            tiles: 1,
            seed: 0,
            tensors: vec![
                tensor("x", &[4, 6]),
                tensor("r", &[4, 2, 3]),
                tensor("t", &[2, 4, 3]),
            ],
            ops: vec![
                Op {
                    name: "r".into(),
                    kind: OpKind::Reshape,
                    inputs: vec![TensorId(0)],
                    output: TensorId(1),
                },
                Op {
                    name: "t".into(),
                    kind: OpKind::Transpose {
                        perm: vec![1, 0, 2],
                    },
                    inputs: vec![TensorId(1)],
                    output: TensorId(2),
                },
            ],
            repeats: vec![],
            outputs: vec![TensorId(2)],
            check: Check {
                reference_precision: ReferencePrecision::Device,
                min_cosine_similarity: 0.99,
                max_abs_error: 1.0,
                outputs: vec![],
            },
        }
    }

    #[test]
    fn chains_resolve_to_the_materialised_tensor() {
        let view = View::of(&graph(), TensorId(2));
        assert_eq!(view.base, TensorId(0));
        assert!(!view.is_identity());
        // t[h, r, c] = x[r, h * 3 + c]
        assert_eq!(view.base_flat_index(&[1, 2, 0]), 2 * 6 + 3);
        assert_eq!(view.base_flat_index(&[0, 3, 2]), 3 * 6 + 2);
    }

    #[test]
    fn transposed_and_broadcast_views() {
        let view = View::of(&graph(), TensorId(0)).transposed_last_two();
        assert_eq!(view.shape, vec![6, 4]);
        assert_eq!(view.base_flat_index(&[5, 1]), 6 + 5);
        let bias = View::of(&graph(), TensorId(0)).broadcast_to(&[3, 4, 6]);
        assert_eq!(bias.base_flat_index(&[2, 1, 4]), 6 + 4);
    }

    /// Checks `base_run` against `base_flat_index` from every index of the
    /// view along every dimension, and returns how many calls it takes to
    /// cover every full row along the last dimension (fewer is better).
    fn check_runs(view: &View) -> usize {
        let rank = view.shape.len();
        let total: usize = view.shape.iter().product();
        let mut calls = 0;
        for flat in 0..total {
            let mut index = vec![0; rank];
            let mut rest = flat;
            for d in (0..rank).rev() {
                index[d] = rest % view.shape[d];
                rest /= view.shape[d];
            }
            for dim in 0..rank {
                let len = view.shape[dim] - index[dim];
                let (first, stride, count) = view.base_run(&index, dim, len);
                assert!((1..=len).contains(&count), "{view:?} {index:?} {dim}");
                for t in 0..count {
                    let mut at = index.clone();
                    at[dim] += t;
                    assert_eq!(
                        first + t * stride,
                        view.base_flat_index(&at),
                        "{view:?} from {index:?} along {dim}, step {t}"
                    );
                }
            }
            if index[rank - 1] == 0 {
                let mut at = index.clone();
                while at[rank - 1] < view.shape[rank - 1] {
                    let len = view.shape[rank - 1] - at[rank - 1];
                    at[rank - 1] += view.base_run(&at, rank - 1, len).2;
                    calls += 1;
                }
            }
        }
        calls
    }

    /// `x [4, 6]` cut to columns `2..5` (and, in `tokens`, to rows `1..4`
    /// of that), as `View::of` builds it from slice operations.
    fn sliced() -> (View, View) {
        let columns = View {
            base: TensorId(0),
            base_shape: vec![4, 6],
            shape: vec![4, 3],
            steps: vec![Step::Slice {
                axis: 1,
                start: 2,
                in_shape: vec![4, 6],
            }],
        };
        let mut tokens = columns.clone();
        tokens.shape = vec![3, 3];
        tokens.steps.insert(
            0,
            Step::Slice {
                axis: 0,
                start: 1,
                in_shape: vec![4, 3],
            },
        );
        (columns, tokens)
    }

    #[test]
    fn slices_offset_their_axis() {
        let (columns, tokens) = sliced();
        // columns[r, c] = x[r, 2 + c]; tokens[r, c] = x[1 + r, 2 + c].
        assert_eq!(columns.base_flat_index(&[3, 1]), 3 * 6 + 3);
        assert_eq!(tokens.base_flat_index(&[0, 0]), 6 + 2);
        assert_eq!(tokens.base_flat_index(&[2, 2]), 3 * 6 + 4);
        assert!(!columns.is_identity());
        assert_eq!(columns.inverse(TensorId(1)), None, "a slice has no inverse");
        assert_eq!(check_runs(&columns), 4, "one call per sliced row");
        assert_eq!(check_runs(&tokens.clone().transposed_last_two()), 3);
        assert_eq!(check_runs(&tokens.reshaped(&[9])), 3, "rows are 6 apart");
    }

    #[test]
    fn runs_through_views_agree_with_element_indices() {
        let g = graph();
        let heads = View::of(&g, TensorId(2));
        assert_eq!(check_runs(&heads), 8, "one call per row of 3");
        assert_eq!(check_runs(&heads.clone().reshaped(&[2, 12])), 8);
        assert_eq!(check_runs(&heads.clone().transposed_last_two()), 6);
        assert_eq!(
            check_runs(&heads.reshaped(&[8, 3]).broadcast_to(&[2, 8, 3])),
            16
        );
        let x = View::of(&g, TensorId(0));
        assert_eq!(check_runs(&x.clone().reshaped(&[24])), 1, "contiguous");
        assert_eq!(check_runs(&x.clone().reshaped(&[3, 8])), 3);
        assert_eq!(
            check_runs(&x.clone().reshaped(&[2, 2, 6]).transposed_last_two()),
            12
        );
        assert_eq!(check_runs(&x.clone().broadcast_to(&[3, 4, 6])), 12);
        let row = View::identity(TensorId(0), &[1, 6], &[1, 6]);
        assert_eq!(check_runs(&row.clone().broadcast_to(&[5, 3, 6])), 15);
        assert_eq!(check_runs(&row.broadcast_to(&[4, 6]).reshaped(&[2, 12])), 4);
    }

    #[test]
    fn transposed_runs_step_by_the_base_row_length() {
        let view = View::of(&graph(), TensorId(0)).transposed_last_two();
        // Column 2 of x read as a row of the transposed view.
        assert_eq!(view.base_run(&[2, 0], 1, 4), (2, 6, 4));
        // A broadcast row repeats the same elements: stride 0.
        let bias = View::identity(TensorId(0), &[1, 6], &[1, 6]).broadcast_to(&[4, 6]);
        assert_eq!(bias.base_run(&[0, 3], 0, 4), (3, 0, 4));
    }
}
