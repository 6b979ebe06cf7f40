//! Random valid projects: random DAGs over every op and dtype of the project
//! format (`book/src/project-format.md`), with FP8 scales, repeats that
//! carry an activation and read outer tensors, views, broadcasting, awkward
//! dimensions, includes and tile counts from 1 to 1472.
//!
//! A project is a pure function of its seed. Every rule of the format is
//! respected by construction; what the book leaves to judgement is chosen to
//! keep values in range: weights are scaled by `1/sqrt(K)`, FP8 scales put a
//! tensor's typical stored value near 8, and the tile count is raised until
//! a generous estimate of the project's memory fits. A small share of FP8
//! scales is drawn from the whole allowed range instead, so saturation and
//! underflow are exercised too.
//!
//! The `[check]` thresholds are left to the caller ([`Generated::with_check`]):
//! they are calibrated on the host reference alone.

mod elementwise;
mod ops;
mod repeats;

use crate::rng::Rng;
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// Limits on what a generated project may hold.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Elements of the largest tensor.
    pub max_elements: usize,
    /// Operations outside repeats, at most.
    pub max_ops: usize,
    /// The share of projects that are instead one block of today's model
    /// shapes (an MLP of a ViT or a larger transformer) on up to 1472
    /// tiles.
    pub model_shaped: f64,
}

impl Limits {
    /// Small projects, for the fixed-seed slice in `cargo test`.
    pub const FAST: Limits = Limits {
        max_elements: 12 * 1024,
        max_ops: 8,
        model_shaped: 0.0,
    };
    /// Larger ones, for the long run.
    pub const LONG: Limits = Limits {
        max_elements: 96 * 1024,
        max_ops: 12,
        model_shaped: 0.03,
    };
}

/// The root project's path in the generated file tree.
pub const ROOT: &str = "p/gen.toml";

/// A generated project: its files (the root first) and what it exercises.
#[derive(Clone, Debug)]
pub struct Generated {
    pub seed: u64,
    /// `(path, text)` with paths relative to the tree's root; the root
    /// project's `[check]` table is written by [`Generated::with_check`].
    pub files: Vec<(String, String)>,
    pub features: BTreeSet<&'static str>,
    outputs: Vec<String>,
    precision: &'static str,
}

/// The thresholds of a `[check]` table.
#[derive(Clone, Copy, Debug)]
pub struct Thresholds {
    pub min_cosine_similarity: f64,
    pub max_abs_error: f64,
}

impl Generated {
    /// The files with `[check]` appended to the root project.
    pub fn with_check(&self, check: Thresholds) -> Vec<(String, String)> {
        let mut files = self.files.clone();
        let outputs: Vec<String> = self.outputs.iter().map(|o| format!("\"{o}\"")).collect();
        let _ = write!(
            files[0].1,
            "\n[check]\nreference_precision = \"{}\"\nmin_cosine_similarity = {:?}\nmax_abs_error = {:?}\noutputs = [{}]\n",
            self.precision,
            check.min_cosine_similarity,
            check.max_abs_error,
            outputs.join(", ")
        );
        files
    }

    /// Every file as one text, for failure reports.
    pub fn text(&self, check: Thresholds) -> String {
        self.with_check(check)
            .iter()
            .map(|(path, text)| format!("# ---- {path}\n{text}"))
            .collect()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dt {
    F32,
    F16,
    F143,
    F152,
}

impl Dt {
    fn name(self) -> &'static str {
        match self {
            Dt::F32 => "f32",
            Dt::F16 => "f16",
            Dt::F143 => "f143",
            Dt::F152 => "f152",
        }
    }

    fn fp8(self) -> bool {
        matches!(self, Dt::F143 | Dt::F152)
    }

    fn bytes(self) -> u64 {
        match self {
            Dt::F32 => 4,
            Dt::F16 => 2,
            Dt::F143 | Dt::F152 => 1,
        }
    }
}

#[derive(Clone, Debug)]
struct Tensor {
    name: String,
    shape: Vec<usize>,
    dt: Dt,
    scale: i32,
    /// A rough root-mean-square of the values, to size weights and scales.
    mag: f64,
    /// Computed by an operation or a repeat (not an input or a weight).
    computed: bool,
    view: bool,
    /// A slice, or a view of one: never a checked output (the host cannot
    /// read it back through the slice).
    sliced: bool,
}

impl Tensor {
    fn last(&self) -> usize {
        *self.shape.last().expect("tensors have a dimension")
    }

    fn elements(&self) -> usize {
        self.shape.iter().product()
    }
}

/// Where new declarations and operations go: the project, or a repeat body.
struct Scope {
    body: bool,
    /// Tensors visible here (a body also sees the outer ones).
    tensors: Vec<Tensor>,
    /// `[[tensor]]` / `[[repeat.tensor]]` blocks.
    decls: Vec<String>,
    /// `[[op]]` / `[[repeat.op]]` blocks (and whole `[[repeat]]`s).
    ops: Vec<String>,
    /// Names read by an operation of this scope (or of a body inside it).
    read: BTreeSet<String>,
}

impl Scope {
    fn new(body: bool, tensors: Vec<Tensor>) -> Scope {
        Scope {
            body,
            tensors,
            decls: Vec::new(),
            ops: Vec::new(),
            read: BTreeSet::new(),
        }
    }

    fn push(&mut self, tensor: Tensor) -> usize {
        self.tensors.push(tensor);
        self.tensors.len() - 1
    }
}

/// Dimensions drawn for new axes, with weights: awkward ones (1, primes,
/// 999, odd multiples) beside round ones.
const DIMS: &[(usize, u32)] = &[
    (1, 4),
    (2, 3),
    (3, 3),
    (4, 2),
    (5, 3),
    (7, 4),
    (8, 3),
    (11, 2),
    (13, 3),
    (16, 5),
    (17, 3),
    (24, 3),
    (31, 3),
    (32, 5),
    (33, 3),
    (48, 3),
    (61, 2),
    (64, 5),
    (65, 2),
    (96, 3),
    (100, 2),
    (127, 2),
    (128, 3),
    (257, 1),
    (999, 1),
];

struct Builder<'r> {
    rng: &'r mut Rng,
    limits: Limits,
    features: BTreeSet<&'static str>,
    next: usize,
    /// Bytes of every tensor, rounded up to whole blocks, repeat weights once
    /// per iteration: the estimate the tile count is sized from.
    footprint: u64,
}

/// Generates the project of `seed`.
pub fn project(seed: u64, limits: Limits) -> Generated {
    let mut rng = Rng::new(seed);
    let mut b = Builder {
        rng: &mut rng,
        limits,
        features: BTreeSet::new(),
        next: 0,
        footprint: 0,
    };
    let mut outer = Scope::new(false, Vec::new());
    if b.rng.chance(limits.model_shaped) {
        let outputs = b.model_block(&mut outer);
        let tiles = if b.rng.chance(0.6) {
            1472
        } else {
            b.rng.range(64, 1472) as u32
        }
        .max(b.tiles_needed());
        let files = b.files(seed, &mut outer, tiles);
        return Generated {
            seed,
            files,
            features: b.features,
            outputs,
            precision: "device",
        };
    }
    for _ in 0..b.rng.range(1, 2) {
        b.new_input(&mut outer);
    }
    let ops = b.rng.range(2, limits.max_ops as i64) as usize;
    let mut made = 0;
    let mut attempts = 0;
    while made < ops && attempts < ops * 8 {
        attempts += 1;
        let before = outer.ops.len();
        if b.rng.chance(0.22) {
            b.repeat(&mut outer);
        } else {
            let x = b.recent(&outer);
            b.random_op(&mut outer, x);
        }
        made += usize::from(outer.ops.len() > before);
    }
    if !outer.tensors.iter().any(|t| t.computed) {
        b.gelu_or_cast(&mut outer, 0);
    }
    let outputs = b.outputs(&outer);
    let tiles = b.tiles();
    let precision = if b.rng.chance(0.7) { "device" } else { "f32" };
    b.features.insert(if precision == "device" {
        "precision-device"
    } else {
        "precision-f32"
    });
    let files = b.files(seed, &mut outer, tiles);
    Generated {
        seed,
        files,
        features: b.features,
        outputs,
        precision,
    }
}

impl Builder<'_> {
    fn name(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}{}", self.next)
    }

    fn dim(&mut self, cap: usize) -> usize {
        let allowed: Vec<(usize, u32)> = DIMS.iter().copied().filter(|(d, _)| *d <= cap).collect();
        if allowed.is_empty() {
            return 1;
        }
        let weights: Vec<u32> = allowed.iter().map(|(_, w)| *w).collect();
        let d = allowed[self.rng.weighted(&weights)].0;
        if d == 1 || d == 999 || d == 257 {
            self.features.insert("awkward-dims");
        }
        d
    }

    /// A shape of `rank` dimensions within the element limit.
    fn shape(&mut self, rank: usize) -> Vec<usize> {
        let mut shape = Vec::new();
        let mut left = self.limits.max_elements;
        for i in 0..rank {
            // Leading (batch) axes stay small so the rows keep some width.
            let cap = if i + 2 < rank { left.min(5) } else { left };
            let d = self.dim(cap.max(1));
            left = (left / d).max(1);
            shape.push(d);
        }
        shape
    }

    /// Counts a tensor's bytes with its last two axes rounded up to whole
    /// blocks of 32, as the GEMM layouts pad them.
    fn account(&mut self, shape: &[usize], dt: Dt, copies: u64) {
        let n = shape.len();
        let mut elements = 1u64;
        for (i, &d) in shape.iter().enumerate() {
            let d = d as u64;
            elements *= if i + 2 >= n { d.div_ceil(32) * 32 } else { d };
        }
        self.footprint += elements * dt.bytes().max(2) * copies;
    }

    /// The most recently made tensors are the likeliest operands, so
    /// graphs grow deep as well as wide.
    fn recent(&mut self, scope: &Scope) -> usize {
        let n = scope.tensors.len();
        let back = self.rng.below(n.min(4));
        if self.rng.chance(0.3) {
            self.rng.below(n)
        } else {
            n - 1 - back
        }
    }

    fn fp8_dtype(&mut self) -> Dt {
        if self.rng.chance(0.6) {
            Dt::F143
        } else {
            Dt::F152
        }
    }

    /// An FP8 scale for values of magnitude `mag`: typical stored values
    /// near 8, or (rarely) anything the format allows.
    fn fp8_scale(&mut self, mag: f64) -> i32 {
        if self.rng.chance(0.02) {
            self.features.insert("fp8-extreme-scale");
            return self.rng.range(-32, 31) as i32;
        }
        // Magnitudes are rough (a tensor of zeros feeds a repeat whose
        // later iterations are not zero), so small ones are not trusted.
        let base = mag.max(0.25).log2().floor() as i32 - 3;
        (base + self.rng.range(-1, 1) as i32).clamp(-32, 31)
    }

    /// An `init` table and the magnitude it gives, around `std`.
    fn init(&mut self, std: f64) -> (String, f64) {
        match self.rng.weighted(&[70, 20, 5, 5]) {
            0 if (std - 1.0).abs() < 1e-12 && self.rng.chance(0.5) => (String::new(), 1.0),
            0 => (
                format!("{{ dist = \"normal\", std = {:?} }}", round3(std)),
                std,
            ),
            1 => {
                let scale = round3(std * 3f64.sqrt());
                (
                    format!("{{ dist = \"uniform\", scale = {scale:?} }}"),
                    scale / 3f64.sqrt(),
                )
            }
            2 => {
                self.features.insert("init-zeros");
                ("{ dist = \"zeros\" }".to_string(), 0.0)
            }
            _ => {
                self.features.insert("init-ones");
                ("{ dist = \"ones\" }".to_string(), 1.0)
            }
        }
    }

    /// Declares an input or weight in `scope` and returns its index.
    fn declare(
        &mut self,
        scope: &mut Scope,
        prefix: &str,
        shape: Vec<usize>,
        dt: Dt,
        std: f64,
        weight: bool,
    ) -> usize {
        let name = self.name(prefix);
        let (init, mag) = self.init(std);
        let scale = if dt.fp8() { self.fp8_scale(mag) } else { 0 };
        let role = if weight || scope.body {
            "weight"
        } else {
            "input"
        };
        let header = if scope.body {
            "[[repeat.tensor]]"
        } else {
            "[[tensor]]"
        };
        let mut text = format!(
            "{header}\nname = \"{name}\"\nshape = {}\ndtype = \"{}\"\n",
            shape_text(&shape),
            dt.name()
        );
        if dt.fp8() && (scale != 0 || self.rng.chance(0.5)) {
            let _ = writeln!(text, "scale = {scale}");
        }
        let _ = writeln!(text, "role = \"{role}\"");
        if !init.is_empty() {
            let _ = writeln!(text, "init = {init}");
        }
        scope.decls.push(text);
        if dt.fp8() {
            self.features
                .insert(if dt == Dt::F143 { "f143" } else { "f152" });
        }
        if dt == Dt::F32 {
            self.features.insert("f32");
        }
        self.account(&shape, dt, 1);
        scope.push(Tensor {
            name,
            shape,
            dt,
            scale,
            mag,
            computed: false,
            view: false,
            sliced: false,
        })
    }

    /// A new f16 weight `[1]` of ones.
    fn one(&mut self, scope: &mut Scope) -> usize {
        let name = self.name("one");
        let header = if scope.body {
            "[[repeat.tensor]]"
        } else {
            "[[tensor]]"
        };
        scope.decls.push(format!(
            "{header}\nname = \"{name}\"\nshape = [1]\ndtype = \"f16\"\nrole = \"weight\"\ninit = {{ dist = \"ones\" }}\n"
        ));
        self.account(&[1], Dt::F16, 1);
        scope.push(Tensor {
            name,
            shape: vec![1],
            dt: Dt::F16,
            scale: 0,
            mag: 1.0,
            computed: false,
            view: false,
            sliced: false,
        })
    }

    fn new_input(&mut self, scope: &mut Scope) -> usize {
        let rank = *self.rng.pick(&[1, 2, 2, 2, 2, 3, 3]);
        let shape = self.shape(rank);
        let dt = match self.rng.weighted(&[75, 10, 15]) {
            0 => Dt::F16,
            1 => Dt::F32,
            _ => self.fp8_dtype(),
        };
        self.declare(scope, "x", shape, dt, 1.0, false)
    }

    /// Writes an `[[op]]` block and adds its result.
    #[allow(clippy::too_many_arguments)]
    fn op(
        &mut self,
        scope: &mut Scope,
        kind: &str,
        inputs: &[usize],
        attributes: &str,
        shape: Vec<usize>,
        dt: Dt,
        scale: i32,
        mag: f64,
    ) -> usize {
        let name = self.name(match kind {
            "transpose" | "reshape" | "slice" => "v",
            _ => "h",
        });
        let header = if scope.body {
            "[[repeat.op]]"
        } else {
            "[[op]]"
        };
        let names: Vec<String> = inputs
            .iter()
            .map(|&i| format!("\"{}\"", scope.tensors[i].name))
            .collect();
        let mut text = format!(
            "{header}\nname = \"{name}\"\nop = \"{kind}\"\ninputs = [{}]\n",
            names.join(", ")
        );
        let view = matches!(kind, "transpose" | "reshape" | "slice");
        let sliced = kind == "slice" || (view && inputs.iter().any(|&i| scope.tensors[i].sliced));
        // The output dtype is required of every op but a view, which may
        // restate its input's.
        if !view || self.rng.chance(0.15) {
            let _ = writeln!(text, "dtype = \"{}\"", dt.name());
        }
        text.push_str(attributes);
        scope.ops.push(text);
        for &i in inputs {
            let read = scope.tensors[i].name.clone();
            scope.read.insert(read);
        }
        self.features.insert(match kind {
            "matmul" => "matmul",
            "cast" => "cast",
            "add" => "add",
            "gelu" => "gelu",
            "softmax" => "softmax",
            "layernorm" => "layernorm",
            "transpose" => "transpose",
            "reshape" => "reshape",
            "mul" => "mul",
            "sub" => "sub",
            "div" => "div",
            "silu" => "silu",
            "gelu_tanh" => "gelu_tanh",
            "rmsnorm" => "rmsnorm",
            "slice" => "slice",
            _ => "rearrange",
        });
        if !view {
            self.account(&shape, dt, 1);
        }
        scope.push(Tensor {
            name,
            shape,
            dt,
            scale,
            mag,
            computed: true,
            view,
            sliced,
        })
    }

    /// The checked outputs: results nobody reads (some of them), and at
    /// times an intermediate tensor or a view.
    fn outputs(&mut self, scope: &Scope) -> Vec<String> {
        let computed: Vec<&Tensor> = scope
            .tensors
            .iter()
            .filter(|t| t.computed && !t.sliced)
            .collect();
        let mut sinks: Vec<&Tensor> = computed
            .iter()
            .copied()
            .filter(|t| !scope.read.contains(&t.name))
            .collect();
        self.rng.shuffle(&mut sinks);
        let mut outputs: Vec<String> = sinks.iter().take(3).map(|t| t.name.clone()).collect();
        if sinks.len() > 3 {
            self.features.insert("unread-operations");
        }
        if self.rng.chance(0.2) {
            let extra = self.rng.pick(&computed).name.clone();
            if !outputs.contains(&extra) {
                outputs.push(extra);
            }
        }
        if outputs.is_empty() {
            outputs.push(computed.last().expect("an operation").name.clone());
        }
        for name in &outputs {
            if scope.tensors.iter().any(|t| &t.name == name && t.view) {
                self.features.insert("view-output");
            }
        }
        outputs
    }

    /// Tiles: mostly few, sometimes awkward counts, sometimes nearly the
    /// whole chip; never fewer than the memory estimate asks for.
    fn tiles(&mut self) -> u32 {
        let drawn = match self.rng.weighted(&[45, 25, 12, 18]) {
            0 => self.rng.range(1, 16),
            1 => self.rng.range(17, 128),
            2 => *self.rng.pick(&[1, 2, 3, 5, 7, 13, 31, 97, 127, 257, 999]),
            _ => {
                self.features.insert("tiles-1000+");
                if self.rng.chance(0.4) {
                    1472
                } else {
                    self.rng.range(1000, 1472)
                }
            }
        } as u32;
        let needed = self.tiles_needed();
        if needed > drawn {
            self.features.insert("tiles-raised-for-memory");
        }
        drawn.max(needed).clamp(1, 1472)
    }

    /// A tile holds 624 KiB; leave most of it for code, layouts, partials
    /// and gathered copies.
    fn tiles_needed(&self) -> u32 {
        (self.footprint * 3).div_ceil(256 * 1024) as u32
    }

    /// The root file (and, at times, includes holding part of the blocks).
    fn files(&mut self, seed: u64, outer: &mut Scope, tiles: u32) -> Vec<(String, String)> {
        let mut blocks: Vec<String> = outer.decls.drain(..).chain(outer.ops.drain(..)).collect();
        // Operations may appear in any order; the compiler sorts them.
        if self.rng.chance(0.3) {
            self.features.insert("shuffled-blocks");
            self.rng.shuffle(&mut blocks);
        }
        let mut included: Vec<String> = Vec::new();
        let mut nested: Vec<String> = Vec::new();
        if blocks.len() >= 3 && self.rng.chance(0.25) {
            self.features.insert("include");
            let moved = self.rng.range(1, blocks.len() as i64 / 2) as usize;
            for _ in 0..moved {
                let i = self.rng.below(blocks.len());
                included.push(blocks.remove(i));
            }
            if included.len() >= 2 && self.rng.chance(0.4) {
                self.features.insert("include-nested");
                nested.push(included.pop().expect("two blocks"));
            }
        }
        let mut root = format!("# generated project, seed {seed}\n\n");
        if !included.is_empty() {
            root.push_str("include = [\"parts/a.toml\"]\n\n");
        }
        let _ = write!(
            root,
            "[project]\nname = \"gen-{seed}\"\ntarget = \"ipu21\"\ntiles = {tiles}\nseed = {}\nkernels = \"../device\"\n",
            seed % 1000
        );
        for block in &blocks {
            root.push('\n');
            root.push_str(block);
        }
        let mut files = vec![(ROOT.to_string(), root)];
        if !included.is_empty() {
            let mut text = String::from("# part of a generated project\n");
            if !nested.is_empty() {
                text.push_str("include = [\"deeper/b.toml\"]\n");
            }
            for block in &included {
                text.push('\n');
                text.push_str(block);
            }
            files.push(("p/parts/a.toml".to_string(), text));
        }
        if !nested.is_empty() {
            files.push(("p/parts/deeper/b.toml".to_string(), nested.concat()));
        }
        files
    }
}

fn compatible(a: Dt, b: Dt) -> bool {
    let amp = |d: Dt| matches!(d, Dt::F16 | Dt::F143 | Dt::F152);
    amp(a) && amp(b) && !(a.fp8() && b.fp8() && a != b)
}

fn smallest_factor(n: usize) -> Option<usize> {
    (2..n)
        .take_while(|f| f * f <= n)
        .find(|f| n.is_multiple_of(*f))
}

fn divisors(n: usize) -> Vec<usize> {
    (1..=n).filter(|d| n.is_multiple_of(*d)).collect()
}

fn shape_text(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(ToString::to_string).collect();
    format!("[{}]", dims.join(", "))
}

/// Three significant digits, so the TOML stays readable.
fn round3(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let digits = 2 - x.abs().log10().floor() as i32;
    let factor = 10f64.powi(digits);
    (x * factor).round() / factor
}
