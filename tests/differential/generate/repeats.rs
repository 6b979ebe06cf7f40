//! Repeats (a body compiled once and looped, carrying one activation,
//! reading outer tensors and its own per-iteration weights) and blocks of
//! today's model shapes.

use super::{Builder, Dt, Scope, Tensor};
use std::collections::BTreeSet;

impl Builder<'_> {
    /// A `[[repeat]]` entered by some tensor of the project; sometimes a
    /// second repeat reads the same input.
    pub(super) fn repeat(&mut self, outer: &mut Scope) {
        let candidates: Vec<usize> = (0..outer.tensors.len())
            .filter(|&i| outer.tensors[i].elements() * 3 <= self.limits.max_elements * 2)
            .collect();
        if candidates.is_empty() {
            return;
        }
        let input = *self.rng.pick(&candidates);
        self.repeat_from(outer, input);
        if self.rng.chance(0.25) {
            self.features.insert("repeats-sharing-input");
            self.repeat_from(outer, input);
        }
    }

    fn repeat_from(&mut self, outer: &mut Scope, input: usize) {
        let entering = outer.tensors[input].clone();
        if !entering.computed {
            self.features.insert(if entering.name.starts_with('x') {
                "repeat-of-input"
            } else {
                "repeat-of-weight-or-input"
            });
        }
        let name = self.name("r");
        let carry_name = self.name("c");
        let count = *self.rng.pick(&[1, 2, 2, 3, 4]);
        let before = self.footprint;
        let mut body = Scope::new(true, outer.tensors.clone());
        let carry = body.push(Tensor {
            name: carry_name.clone(),
            computed: true,
            view: false,
            sliced: false,
            ..entering.clone()
        });
        // Into f16, a few shape-keeping steps, back to the carry's dtype.
        let mut h = match entering.dt {
            Dt::F16 => carry,
            _ => self.cast(&mut body, carry, Dt::F16, 0),
        };
        for _ in 0..self.rng.range(1, 4) {
            h = self.body_step(&mut body, outer, h, carry);
        }
        let result = match entering.dt {
            Dt::F16 if self.rng.chance(0.4) && h != carry => {
                self.features.insert("repeat-residual");
                let inputs = if self.rng.chance(0.5) {
                    [h, carry]
                } else {
                    [carry, h]
                };
                let mag = (body.tensors[h].mag.powi(2) + entering.mag.powi(2)).sqrt();
                self.op(
                    &mut body,
                    "add",
                    &inputs,
                    "",
                    entering.shape.clone(),
                    Dt::F16,
                    0,
                    mag,
                )
            }
            Dt::F16 if h == carry => self.gelu(&mut body, h),
            Dt::F16 => h,
            dt => self.cast(&mut body, h, dt, entering.scale),
        };
        // Every iteration has its own instance of the body's weights.
        self.footprint = before + (self.footprint - before) * count as u64;
        self.features.insert("repeat");
        if entering.dt != Dt::F16 {
            self.features.insert("repeat-carry-not-f16");
        }
        let mut text = format!(
            "[[repeat]]\nname = \"{name}\"\ncount = {count}\ninput = \"{}\"\ncarry = \"{carry_name}\"\nresult = \"{}\"\n",
            entering.name, body.tensors[result].name
        );
        for block in body.decls.iter().chain(&body.ops) {
            text.push('\n');
            text.push_str(block);
        }
        outer.ops.push(text);
        outer.read.insert(entering.name.clone());
        let outer_names: BTreeSet<&String> = outer.tensors.iter().map(|t| &t.name).collect();
        let shared: Vec<String> = body
            .read
            .iter()
            .filter(|n| outer_names.contains(n))
            .cloned()
            .collect();
        outer.read.extend(shared);
        let mag = body.tensors[result].mag.max(entering.mag);
        outer.push(Tensor {
            name,
            computed: true,
            view: false,
            sliced: false,
            mag,
            ..entering
        });
    }

    /// One step of a repeat body from `h` (f16) to a tensor of the same
    /// shape in f16, reading body weights, outer tensors or the carry.
    fn body_step(&mut self, body: &mut Scope, outer: &mut Scope, h: usize, carry: usize) -> usize {
        let t = body.tensors[h].clone();
        let rank = t.shape.len();
        let d = t.last();
        // Square weights keep the width, if they fit.
        let square = rank >= 2 && d * d <= self.limits.max_elements;
        match self.rng.weighted(&[12, 8, 10, 14, 22, 10, 8, 6, 6, 4]) {
            0 => self.gelu(body, h),
            1 => self.softmax(body, h),
            2 => self.layernorm_in(body, Some(outer), h),
            3 => {
                if body.tensors[carry].dt == Dt::F16 && carry != h && self.rng.chance(0.3) {
                    let mag = (t.mag.powi(2) + body.tensors[carry].mag.powi(2)).sqrt();
                    self.op(body, "add", &[h, carry], "", t.shape, Dt::F16, 0, mag)
                } else {
                    self.add_in(body, Some(outer), h, true)
                }
            }
            4 if square => {
                // A weight from outside the repeat is shared by every
                // iteration.
                let dt = match self.rng.weighted(&[50, 30, 20]) {
                    0 => Dt::F16,
                    1 => Dt::F143,
                    _ => Dt::F152,
                };
                let std = 1.0 / ((d as f64).sqrt() * t.mag.max(0.25));
                let transpose_rhs = self.rng.chance(0.3);
                let w = self.parameter(body, Some(outer), vec![d, d], dt, std);
                self.matmul_of(body, h, w, transpose_rhs)
            }
            5 if square => {
                let dt = self.fp8_dtype();
                let scale = self.fp8_scale(t.mag);
                let h8 = self.cast(body, h, dt, scale);
                let std = 1.0 / ((d as f64).sqrt() * t.mag.max(0.25));
                let w = self.parameter(body, Some(outer), vec![d, d], dt, std);
                self.matmul_of(body, h8, w, false)
            }
            6 if rank >= 2 => {
                self.features.insert("repeat-views");
                let mut perm: Vec<usize> = (0..rank).collect();
                perm.swap(rank - 2, rank - 1);
                let v = self.transpose_by(body, h, &perm);
                let g = self.gelu(body, v);
                self.transpose_by(body, g, &perm)
            }
            7 => {
                self.features.insert("repeat-views");
                let flat = vec![t.elements()];
                let v = self.reshape_to(body, h, flat);
                let g = self.gelu(body, v);
                self.reshape_to(body, g, t.shape)
            }
            8 if rank >= 2 => self.rearrange(body, h),
            _ => {
                let wide = self.cast(body, h, Dt::F32, 0);
                let sum = self.add_in(body, Some(outer), wide, true);
                self.cast(body, sum, Dt::F16, 0)
            }
        }
    }

    /// One transformer MLP block at a real model's size: tokens by width,
    /// a hidden layer several times wider, f16 or FP8 weights, optionally
    /// a layer norm in front, a bias and a residual connection.
    pub(super) fn model_block(&mut self, scope: &mut Scope) -> Vec<String> {
        self.features.insert("model-shaped");
        let tokens = *self.rng.pick(&[197, 256, 729, 1024]);
        let width = *self.rng.pick(&[384, 768, 1152]);
        let hidden = *self.rng.pick(&[1536, 3072, 4304]);
        let weights = *self.rng.pick(&[Dt::F16, Dt::F16, Dt::F143]);
        let x = self.declare(scope, "x", vec![tokens, width], Dt::F16, 1.0, false);
        let mut h = x;
        if self.rng.chance(0.5) {
            h = self.layernorm(scope, h);
        }
        let layer = |b: &mut Self, scope: &mut Scope, h: usize, k: usize, n: usize| {
            let input = if weights.fp8() {
                let scale = b.fp8_scale(scope.tensors[h].mag);
                b.cast(scope, h, weights, scale)
            } else {
                h
            };
            let std = 1.0 / ((k as f64).sqrt() * scope.tensors[h].mag.max(0.25));
            let w = b.declare(scope, "w", vec![k, n], weights, std, true);
            b.matmul_of(scope, input, w, false)
        };
        let mut a = layer(self, scope, h, width, hidden);
        if self.rng.chance(0.5) {
            a = self.add_in(scope, None, a, true);
        }
        let g = self.gelu(scope, a);
        let mut y = layer(self, scope, g, hidden, width);
        if self.rng.chance(0.5) {
            let mag = (scope.tensors[x].mag.powi(2) + scope.tensors[y].mag.powi(2)).sqrt();
            y = self.op(
                scope,
                "add",
                &[x, y],
                "",
                vec![tokens, width],
                Dt::F16,
                0,
                mag,
            );
        }
        vec![scope.tensors[y].name.clone()]
    }
}
