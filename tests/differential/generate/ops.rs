//! One builder per kind of operation, each writing a valid `[[op]]` (or
//! `[[repeat.op]]`) and declaring what it reads when nothing fits.

use super::{compatible, divisors, round3, smallest_factor, Builder, Dt, Scope};
use ipub::project::shapes::broadcast;
use std::fmt::Write as _;

impl Builder<'_> {
    /// One random operation reading `x` (and whatever else it needs).
    pub(super) fn random_op(&mut self, scope: &mut Scope, x: usize) -> Option<usize> {
        let t = scope.tensors[x].clone();
        let rank = t.shape.len();
        match t.dt {
            Dt::F16 => match self
                .rng
                .weighted(&[24, 8, 10, 8, 14, 10, 8, 8, 5, 8, 4, 6, 5, 5])
            {
                0 if rank >= 2 => Some(self.matmul(scope, x)),
                1 => Some(self.gelu(scope, x)),
                2 => Some(self.softmax(scope, x)),
                3 => Some(self.layernorm(scope, x)),
                4 => Some(self.add(scope, x)),
                5 => Some(self.cast_from_f16(scope, x)),
                6 if rank >= 2 => Some(self.transpose(scope, x)),
                7 => self.reshape(scope, x),
                8 if rank >= 2 => Some(self.rearrange(scope, x)),
                9 => Some(self.mul_or_sub(scope, x)),
                10 => Some(self.div(scope, x)),
                11 => Some(self.activation(scope, x)),
                12 => Some(self.rmsnorm(scope, x)),
                13 => self.slice(scope, x),
                _ => Some(self.gelu(scope, x)),
            },
            Dt::F32 => match self.rng.weighted(&[40, 40, 10, 10, 10, 8, 5]) {
                0 => Some(self.add(scope, x)),
                1 => Some(self.cast(scope, x, Dt::F16, 0)),
                2 if rank >= 2 => Some(self.transpose(scope, x)),
                4 => Some(self.mul_or_sub(scope, x)),
                5 => Some(self.activation(scope, x)),
                6 => self.slice(scope, x),
                _ => self
                    .reshape(scope, x)
                    .or_else(|| Some(self.cast(scope, x, Dt::F16, 0))),
            },
            _ => match self.rng.weighted(&[45, 35, 10, 10, 5]) {
                0 if rank >= 2 => Some(self.matmul(scope, x)),
                2 if rank >= 2 => Some(self.transpose(scope, x)),
                3 => self.reshape(scope, x),
                4 => self.slice(scope, x),
                _ => Some(self.cast(scope, x, Dt::F16, 0)),
            },
        }
    }

    pub(super) fn gelu_or_cast(&mut self, scope: &mut Scope, x: usize) -> usize {
        if scope.tensors[x].dt == Dt::F16 {
            self.gelu(scope, x)
        } else {
            self.cast(scope, x, Dt::F16, 0)
        }
    }

    pub(super) fn gelu(&mut self, scope: &mut Scope, x: usize) -> usize {
        let t = scope.tensors[x].clone();
        self.op(
            scope,
            "gelu",
            &[x],
            "",
            t.shape,
            Dt::F16,
            0,
            (t.mag * 0.6).max(0.05),
        )
    }

    /// A softmax with its multiplier (at times 0, negative or large) and,
    /// over two axes or more, sometimes causal.
    pub(super) fn softmax(&mut self, scope: &mut Scope, x: usize) -> usize {
        let t = scope.tensors[x].clone();
        let mut attributes = String::new();
        match self.rng.weighted(&[40, 45, 15]) {
            0 => {}
            1 => {
                let scale = *self
                    .rng
                    .pick(&[0.125, 0.5, 2.0, 1.0 / (t.last() as f64).sqrt()]);
                let _ = writeln!(attributes, "scale = {:?}", round3(scale));
            }
            _ => {
                let scale = *self.rng.pick(&[-1.0, 0.0, 4.0]);
                self.features.insert("softmax-odd-scale");
                let _ = writeln!(attributes, "scale = {scale:?}");
            }
        }
        if t.shape.len() >= 2 && self.rng.chance(0.4) {
            self.features.insert("softmax-causal");
            attributes.push_str("causal = true\n");
        } else if self.rng.chance(0.1) {
            attributes.push_str("causal = false\n");
        }
        let mag = 1.0 / (t.last() as f64).sqrt();
        self.op(
            scope,
            "softmax",
            &[x],
            &attributes,
            t.shape,
            Dt::F16,
            0,
            mag,
        )
    }

    /// A weight (or, in a body, sometimes an outer weight shared by every
    /// iteration) for a parameter of shape `shape`.
    pub(super) fn parameter(
        &mut self,
        scope: &mut Scope,
        outer: Option<&mut Scope>,
        shape: Vec<usize>,
        dt: Dt,
        std: f64,
    ) -> usize {
        match outer {
            Some(outer) if self.rng.chance(0.35) => {
                self.features.insert("repeat-shared-weight");
                let i = self.declare(outer, "w", shape, dt, std, true);
                let t = outer.tensors[i].clone();
                scope.push(t)
            }
            _ => self.declare(scope, "w", shape, dt, std, true),
        }
    }

    pub(super) fn layernorm(&mut self, scope: &mut Scope, x: usize) -> usize {
        self.layernorm_in(scope, None, x)
    }

    pub(super) fn layernorm_in(
        &mut self,
        scope: &mut Scope,
        mut outer: Option<&mut Scope>,
        x: usize,
    ) -> usize {
        let t = scope.tensors[x].clone();
        let gamma = self.parameter(scope, outer.as_deref_mut(), vec![t.last()], Dt::F16, 1.0);
        let beta = self.parameter(scope, outer, vec![t.last()], Dt::F16, 0.1);
        let mut attributes = String::new();
        if self.rng.chance(0.3) {
            let epsilon = *self.rng.pick(&[1e-6, 1e-3, 0.1]);
            let _ = writeln!(attributes, "epsilon = {epsilon:?}");
        }
        let mag = scope.tensors[gamma].mag + scope.tensors[beta].mag;
        self.op(
            scope,
            "layernorm",
            &[x, gamma, beta],
            &attributes,
            t.shape,
            Dt::F16,
            0,
            mag.max(0.05),
        )
    }

    /// `x + y` with `y` an existing tensor of a broadcastable shape, or a new
    /// one: the same shape, a bias over the last axis, a column, a row, a
    /// single value, or a shape `x` broadcasts into.
    pub(super) fn add(&mut self, scope: &mut Scope, x: usize) -> usize {
        self.add_in(scope, None, x, false)
    }

    /// [`Builder::add`] in a repeat body (`outer` given: the other operand
    /// may come from outside the repeat); with `keep`, the result has
    /// `x`'s shape.
    pub(super) fn add_in(
        &mut self,
        scope: &mut Scope,
        outer: Option<&mut Scope>,
        x: usize,
        keep: bool,
    ) -> usize {
        self.binary_in(scope, outer, x, keep, "add")
    }

    /// [`Builder::add_in`] for `add`, `sub` or `mul` (`kind`): the operand
    /// choice and the broadcasting rules are the same.
    pub(super) fn binary_in(
        &mut self,
        scope: &mut Scope,
        outer: Option<&mut Scope>,
        x: usize,
        keep: bool,
        kind: &str,
    ) -> usize {
        let t = scope.tensors[x].clone();
        let existing: Vec<usize> = (0..scope.tensors.len())
            .filter(|&i| i != x && scope.tensors[i].dt == t.dt)
            .filter(|&i| {
                let b = broadcast(&t.shape, &scope.tensors[i].shape);
                b.as_deref() == Some(&t.shape[..]) || (!keep && b.is_some())
            })
            .collect();
        let y = if !existing.is_empty() && self.rng.chance(0.4) {
            *self.rng.pick(&existing)
        } else {
            let rank = t.shape.len();
            let mut shape = t.shape.clone();
            match self.rng.weighted(&[30, 30, 10, 10, 8, 12]) {
                0 => {}
                1 => shape = vec![t.last()],
                2 if rank >= 2 => shape[rank - 1] = 1,
                3 if rank >= 2 => {
                    shape = vec![1; rank];
                    shape[rank - 1] = t.last();
                }
                4 => shape = vec![1],
                5 if !keep && t.elements() * 5 <= self.limits.max_elements => {
                    shape.insert(0, self.dim(5));
                }
                _ => {}
            }
            if shape != t.shape {
                self.features.insert("broadcast");
            }
            let std = t.mag.max(0.1);
            match outer {
                Some(outer) if self.rng.chance(0.5) => {
                    self.features.insert("repeat-shared-input");
                    let weight = self.rng.chance(0.5);
                    let i = self.declare(outer, "b", shape, t.dt, std, weight);
                    let u = outer.tensors[i].clone();
                    scope.push(u)
                }
                _ => {
                    let weight = scope.body || self.rng.chance(0.5);
                    self.declare(scope, "b", shape, t.dt, std, weight)
                }
            }
        };
        let u = scope.tensors[y].clone();
        let shape = broadcast(&t.shape, &u.shape).expect("broadcastable");
        let mag = if kind == "mul" {
            t.mag * u.mag
        } else {
            (t.mag * t.mag + u.mag * u.mag).sqrt()
        };
        let inputs = if self.rng.chance(0.5) { [x, y] } else { [y, x] };
        self.op(scope, kind, &inputs, "", shape, t.dt, 0, mag)
    }

    pub(super) fn cast(&mut self, scope: &mut Scope, x: usize, dt: Dt, scale: i32) -> usize {
        let t = scope.tensors[x].clone();
        let mut attributes = String::new();
        if dt.fp8() && (scale != 0 || self.rng.chance(0.5)) {
            let _ = writeln!(attributes, "scale = {scale}");
        }
        self.op(scope, "cast", &[x], &attributes, t.shape, dt, scale, t.mag)
    }

    pub(super) fn cast_from_f16(&mut self, scope: &mut Scope, x: usize) -> usize {
        if self.rng.chance(0.3) {
            return self.cast(scope, x, Dt::F32, 0);
        }
        let dt = self.fp8_dtype();
        let scale = self.fp8_scale(scope.tensors[x].mag);
        self.cast(scope, x, dt, scale)
    }

    /// `x @ w` with a new weight, or with another tensor of the right shape
    /// (attention-like products of two activations).
    pub(super) fn matmul(&mut self, scope: &mut Scope, x: usize) -> usize {
        let t = scope.tensors[x].clone();
        let rank = t.shape.len();
        let k = t.last();
        let batch = &t.shape[..rank - 2];
        let rows = t.shape[rank - 2] * batch.iter().product::<usize>();
        let transpose_rhs = self.rng.chance(0.3);
        // Another tensor as the right operand: the same batch (or 2-D), the
        // inner dimension k, a compatible dtype.
        let partners: Vec<usize> = (0..scope.tensors.len())
            .filter(|&i| {
                let u = &scope.tensors[i];
                let r = u.shape.len();
                r >= 2
                    && compatible(t.dt, u.dt)
                    && (r == 2 || u.shape[..r - 2] == *batch)
                    && u.shape[if transpose_rhs { r - 1 } else { r - 2 }] == k
                    && rows * u.shape[if transpose_rhs { r - 2 } else { r - 1 }]
                        <= self.limits.max_elements
            })
            .collect();
        let y = if !partners.is_empty() && self.rng.chance(0.3) {
            self.features.insert("matmul-two-activations");
            *self.rng.pick(&partners)
        } else {
            let cap = (self.limits.max_elements / rows.max(1)).min(self.limits.max_elements / k);
            let n = self.dim(cap.max(1));
            let dt = match t.dt {
                Dt::F16 => match self.rng.weighted(&[50, 30, 20]) {
                    0 => Dt::F16,
                    1 => Dt::F143,
                    _ => Dt::F152,
                },
                _ if self.rng.chance(0.25) => Dt::F16,
                fp8 => fp8,
            };
            let mut shape = if transpose_rhs {
                vec![n, k]
            } else {
                vec![k, n]
            };
            if !batch.is_empty() && self.rng.chance(0.4) {
                self.features.insert("matmul-batched-rhs");
                shape.splice(0..0, batch.iter().copied());
            }
            let std = 1.0 / ((k as f64).sqrt() * t.mag.max(0.25));
            let weight = self.rng.chance(0.8);
            self.declare(scope, "w", shape, dt, std, weight)
        };
        // At times an f32 result: f32 partials from start to end.
        let dt = if self.rng.chance(0.12) {
            self.features.insert("matmul-f32-result");
            Dt::F32
        } else {
            Dt::F16
        };
        self.matmul_to(scope, x, y, transpose_rhs, dt)
    }

    /// `x @ y` with an f16 result.
    pub(super) fn matmul_of(
        &mut self,
        scope: &mut Scope,
        x: usize,
        y: usize,
        transpose_rhs: bool,
    ) -> usize {
        self.matmul_to(scope, x, y, transpose_rhs, Dt::F16)
    }

    /// `x @ y` with a result of dtype `dt` (f16 or f32).
    pub(super) fn matmul_to(
        &mut self,
        scope: &mut Scope,
        x: usize,
        y: usize,
        transpose_rhs: bool,
        dt: Dt,
    ) -> usize {
        let (t, u) = (scope.tensors[x].clone(), scope.tensors[y].clone());
        let (r, k) = (u.shape.len(), t.last());
        let n = u.shape[if transpose_rhs { r - 2 } else { r - 1 }];
        let mut shape = t.shape[..t.shape.len() - 1].to_vec();
        shape.push(n);
        if t.dt != u.dt {
            self.features.insert("matmul-mixed");
        } else if t.dt.fp8() {
            self.features.insert("matmul-fp8");
        }
        if t.shape.len() > 2 {
            self.features.insert("matmul-batched");
        }
        let attributes = if transpose_rhs {
            self.features.insert("transpose-rhs");
            "transpose_rhs = true\n".to_string()
        } else if self.rng.chance(0.1) {
            "transpose_rhs = false\n".to_string()
        } else {
            String::new()
        };
        let mag = t.mag * u.mag * (k as f64).sqrt();
        self.op(scope, "matmul", &[x, y], &attributes, shape, dt, 0, mag)
    }

    pub(super) fn transpose(&mut self, scope: &mut Scope, x: usize) -> usize {
        let rank = scope.tensors[x].shape.len();
        let mut perm: Vec<usize> = (0..rank).collect();
        while perm.iter().enumerate().all(|(i, &p)| i == p) {
            self.rng.shuffle(&mut perm);
        }
        self.transpose_by(scope, x, &perm)
    }

    pub(super) fn transpose_by(&mut self, scope: &mut Scope, x: usize, perm: &[usize]) -> usize {
        let t = scope.tensors[x].clone();
        let shape = perm.iter().map(|&p| t.shape[p]).collect();
        let text: Vec<String> = perm.iter().map(ToString::to_string).collect();
        self.op(
            scope,
            "transpose",
            &[x],
            &format!("perm = [{}]\n", text.join(", ")),
            shape,
            t.dt,
            t.scale,
            t.mag,
        )
    }

    /// A reshape that merges or splits axes (with `-1` for one of them at
    /// times); `None` when `x` has nothing to merge or split.
    pub(super) fn reshape(&mut self, scope: &mut Scope, x: usize) -> Option<usize> {
        let t = scope.tensors[x].clone();
        let rank = t.shape.len();
        let mut shape = t.shape.clone();
        if rank >= 2 && self.rng.chance(0.5) {
            let i = self.rng.below(rank - 1);
            let merged = shape[i] * shape[i + 1];
            shape.splice(i..i + 2, [merged]);
        } else {
            let splittable: Vec<usize> = (0..rank)
                .filter(|&i| smallest_factor(shape[i]).is_some())
                .collect();
            if splittable.is_empty() || rank >= 4 {
                if rank < 2 {
                    return None;
                }
                let merged = shape[rank - 2] * shape[rank - 1];
                shape.splice(rank - 2..rank, [merged]);
            } else {
                let i = *self.rng.pick(&splittable);
                let f = smallest_factor(shape[i]).expect("splittable");
                let g = if self.rng.chance(0.5) {
                    f
                } else {
                    shape[i] / f
                };
                shape.splice(i..=i, [g, shape[i] / g]);
            }
        }
        Some(self.reshape_to(scope, x, shape))
    }

    pub(super) fn reshape_to(&mut self, scope: &mut Scope, x: usize, shape: Vec<usize>) -> usize {
        let t = scope.tensors[x].clone();
        let mut dims: Vec<String> = shape.iter().map(ToString::to_string).collect();
        if self.rng.chance(0.3) {
            let i = self.rng.below(dims.len());
            dims[i] = "-1".to_string();
        }
        self.op(
            scope,
            "reshape",
            &[x],
            &format!("shape = [{}]\n", dims.join(", ")),
            shape,
            t.dt,
            t.scale,
            t.mag,
        )
    }

    pub(super) fn rearrange(&mut self, scope: &mut Scope, x: usize) -> usize {
        let t = scope.tensors[x].clone();
        let rank = t.shape.len();
        let r = *self.rng.pick(&divisors(t.shape[rank - 2]));
        let c = *self.rng.pick(&divisors(t.shape[rank - 1]));
        self.op(
            scope,
            "rearrange",
            &[x],
            &format!("block = [{r}, {c}]\n"),
            t.shape,
            Dt::F16,
            0,
            t.mag,
        )
    }
}
