//! Builders for the elementwise family beyond `add` (`mul`, `sub`, `div`,
//! `silu`, `gelu_tanh`), `rmsnorm`, and `slice` views.

use super::{Builder, Dt, Scope};
use ipub::project::shapes::broadcast;
use std::fmt::Write as _;

impl Builder<'_> {
    /// `x * y` or `x - y`, `y` chosen as [`Builder::add`] chooses it.
    pub(super) fn mul_or_sub(&mut self, scope: &mut Scope, x: usize) -> usize {
        let kind = if self.rng.chance(0.5) { "mul" } else { "sub" };
        self.binary_in(scope, None, x, false, kind)
    }

    /// `x / q` with a divisor in (1, 2]: `q = 1 + softmax(d)` for a new
    /// `d` of a shape that broadcasts with `x`, so the quotient keeps `x`'s
    /// magnitude (a divisor near zero would overflow f16 and only test how
    /// infinities propagate, which `add` chains already do) while every
    /// element is divided by a different value.
    pub(super) fn div(&mut self, scope: &mut Scope, x: usize) -> usize {
        let t = scope.tensors[x].clone();
        let rank = t.shape.len();
        let mut shape = t.shape.clone();
        match self.rng.weighted(&[40, 30, 15, 15]) {
            0 => {}
            1 => shape = vec![t.last()],
            2 if rank >= 2 => shape[rank - 1] = 1,
            _ => shape = vec![1],
        }
        if shape != t.shape {
            self.features.insert("broadcast");
        }
        let d = self.declare(scope, "d", shape.clone(), Dt::F16, 1.0, true);
        let last = *shape.last().expect("a dimension");
        let p = self.op(
            scope,
            "softmax",
            &[d],
            "",
            shape.clone(),
            Dt::F16,
            0,
            1.0 / last as f64,
        );
        let one = self.one(scope);
        let q = self.op(scope, "add", &[one, p], "", shape.clone(), Dt::F16, 0, 1.5);
        let out = broadcast(&t.shape, &shape).expect("broadcastable");
        self.op(scope, "div", &[x, q], "", out, Dt::F16, 0, t.mag)
    }

    /// `silu` or the tanh-approximate `gelu` of `x` (f16 or f32).
    pub(super) fn activation(&mut self, scope: &mut Scope, x: usize) -> usize {
        let t = scope.tensors[x].clone();
        let kind = if self.rng.chance(0.5) {
            "silu"
        } else {
            "gelu_tanh"
        };
        self.op(
            scope,
            kind,
            &[x],
            "",
            t.shape,
            t.dt,
            0,
            (t.mag * 0.6).max(0.05),
        )
    }

    /// `rmsnorm` of an f16 `x` with a new `gamma` (sometimes an `epsilon`).
    pub(super) fn rmsnorm(&mut self, scope: &mut Scope, x: usize) -> usize {
        let t = scope.tensors[x].clone();
        let gamma = self.parameter(scope, None, vec![t.last()], Dt::F16, 1.0);
        let mut attributes = String::new();
        if self.rng.chance(0.3) {
            let epsilon = *self.rng.pick(&[1e-6, 1e-3, 0.1]);
            let _ = writeln!(attributes, "epsilon = {epsilon:?}");
        }
        let mag = scope.tensors[gamma].mag.max(0.05);
        self.op(
            scope,
            "rmsnorm",
            &[x, gamma],
            &attributes,
            t.shape,
            Dt::F16,
            0,
            mag,
        )
    }

    /// A slice of one axis (negative axes at times), `None` when every
    /// axis has extent 1.
    pub(super) fn slice(&mut self, scope: &mut Scope, x: usize) -> Option<usize> {
        let t = scope.tensors[x].clone();
        let rank = t.shape.len();
        let axes: Vec<usize> = (0..rank).filter(|&a| t.shape[a] > 1).collect();
        if axes.is_empty() {
            return None;
        }
        let axis = *self.rng.pick(&axes);
        let extent = t.shape[axis];
        let start = self.rng.below(extent);
        let end = start + 1 + self.rng.below(extent - start);
        let written = if self.rng.chance(0.3) {
            axis as i64 - rank as i64
        } else {
            axis as i64
        };
        let mut shape = t.shape.clone();
        shape[axis] = end - start;
        let attributes = format!("axis = {written}\nstart = {start}\nend = {end}\n");
        Some(self.op(
            scope,
            "slice",
            &[x],
            &attributes,
            shape,
            t.dt,
            t.scale,
            t.mag,
        ))
    }
}
