//! Shape and dtype rules of each operation.
//!
//! [`infer`] checks an operation's inputs and attributes and returns what it
//! produces. Errors point at the key at fault: an input name for a shape or
//! dtype mismatch, the attribute for a bad attribute.

use super::syntax::OpAst;
use super::Site;
use crate::diagnostic::Diagnostic;
use crate::graph::{DType, OpKind};
use toml::Spanned;

mod reduce;

/// An input as the rules see it.
pub(super) struct Input<'a> {
    pub name: &'a Spanned<String>,
    pub shape: &'a [usize],
    pub dtype: DType,
    /// The FP8 scale (0 for other dtypes), which views keep.
    pub scale: i8,
}

pub(super) struct Inferred {
    pub kind: OpKind,
    pub shape: Vec<usize>,
    pub dtype: DType,
    pub scale: i8,
}

/// The FP8 scales the device's cast instructions accept.
pub(super) const FP8_SCALE_RANGE: std::ops::RangeInclusive<i64> = -32..=31;

pub(super) const OP_NAMES: &[&str] = &[
    "matmul",
    "cast",
    "add",
    "mul",
    "sub",
    "div",
    "gelu",
    "gelu_tanh",
    "silu",
    "rmsnorm",
    "softmax",
    "layernorm",
    "transpose",
    "reshape",
    "rearrange",
    "slice",
    "concat",
    "reduce_sum",
    "reduce_mean",
    "reduce_max",
];

pub(super) fn infer(site: &Site, op: &OpAst, inputs: &[Input]) -> Result<Inferred, Diagnostic> {
    let kind = op.op.get_ref().as_str();
    if !OP_NAMES.contains(&kind) {
        return Err(suggest(
            site.error(format!("unknown op `{kind}`"), op.op.span()),
            kind,
            OP_NAMES,
        )
        .help(format!("ops are {}", OP_NAMES.join(", "))));
    }
    reject_foreign_keys(site, op, kind)?;
    // `concat` takes any number of inputs from two up.
    if kind == "concat" {
        return concat(site, op, inputs, declared_dtype(site, op)?);
    }
    let arity = match kind {
        "matmul" | "add" | "mul" | "sub" | "div" | "rmsnorm" => 2,
        "layernorm" => 3,
        // A softmax's optional second input is its additive mask.
        "softmax" if inputs.len() == 2 => 2,
        _ => 1,
    };
    if kind == "softmax" && inputs.len() > 2 {
        return Err(super::softmax_mask::too_many_inputs(site, op, inputs.len()));
    }
    if inputs.len() != arity {
        return Err(site
            .error(
                format!(
                    "`{kind}` takes {arity} input{}, found {}",
                    if arity == 1 { "" } else { "s" },
                    inputs.len()
                ),
                op.inputs.span(),
            )
            .label(format!("expected {arity}")));
    }
    let declared = declared_dtype(site, op)?;
    match kind {
        "matmul" => matmul(site, op, inputs, declared),
        "cast" => cast(site, op, inputs, declared),
        "add" | "mul" | "sub" | "div" => add(site, op, inputs, declared),
        "rmsnorm" => rmsnorm(site, op, inputs, declared),
        "silu" | "gelu_tanh" => {
            let x = &inputs[0];
            require_dtype(site, x, &[DType::F16, DType::F32], kind)?;
            let out = output_dtype(site, op, declared, x.dtype, &[x.dtype])?;
            let kind = if kind == "silu" {
                OpKind::Silu
            } else {
                OpKind::GeluTanh
            };
            Ok(plain(kind, x.shape.to_vec(), out))
        }
        "gelu" | "softmax" => {
            let x = &inputs[0];
            require_dtype(site, x, &[DType::F16], kind)?;
            let out = output_dtype(site, op, declared, DType::F16, &[DType::F16])?;
            let kind = if kind == "gelu" {
                OpKind::Gelu
            } else {
                let scale = op.scale.as_ref().map_or(1.0, |s| *s.get_ref()) as f32;
                if !scale.is_finite() {
                    return Err(site.error("softmax `scale` must be finite", span(&op.scale)));
                }
                let causal = op.causal.as_ref().is_some_and(|c| *c.get_ref());
                // A causal mask compares a row index with a column index,
                // so it needs the last two axes.
                if causal && x.shape.len() < 2 {
                    return Err(site
                        .error(
                            format!(
                                "a causal softmax needs at least two dimensions, but its input is {:?}",
                                x.shape
                            ),
                            span(&op.causal),
                        )
                        .label("masks `[.., i, j]` for `j > i`")
                        .help("reshape the input to `[1, n]`, or drop `causal`"));
                }
                if let Some(mask) = inputs.get(1) {
                    let mask = super::softmax_mask::Mask {
                        name: mask.name,
                        shape: mask.shape,
                        dtype: mask.dtype,
                    };
                    super::softmax_mask::check(site, op, x.shape, mask)?;
                }
                OpKind::Softmax { scale, causal }
            };
            Ok(plain(kind, x.shape.to_vec(), out))
        }
        "layernorm" => layernorm(site, op, inputs, declared),
        "transpose" => transpose(site, op, inputs, declared),
        "reshape" => reshape(site, op, inputs, declared),
        "slice" => slice(site, op, inputs, declared),
        "reduce_sum" | "reduce_mean" | "reduce_max" => reduce::infer(site, op, inputs, declared),
        _ => rearrange(site, op, inputs, declared),
    }
}

fn span<T>(value: &Option<Spanned<T>>) -> std::ops::Range<usize> {
    value.as_ref().map_or(0..0, |v| v.span())
}

/// A view: the same elements as `x`, so the same dtype and FP8 scale.
fn view(kind: OpKind, shape: Vec<usize>, dtype: DType, x: &Input) -> Inferred {
    Inferred {
        scale: x.scale,
        ..plain(kind, shape, dtype)
    }
}

fn plain(kind: OpKind, shape: Vec<usize>, dtype: DType) -> Inferred {
    Inferred {
        kind,
        shape,
        dtype,
        scale: 0,
    }
}

/// Attributes that belong to other ops are errors, not silently ignored.
fn reject_foreign_keys(site: &Site, op: &OpAst, kind: &str) -> Result<(), Diagnostic> {
    type Attribute<'k> = (&'k str, Option<std::ops::Range<usize>>, &'k [&'k str]);
    let present: [Attribute; 9] = [
        (
            "transpose_rhs",
            op.transpose_rhs.as_ref().map(|v| v.span()),
            &["matmul"],
        ),
        ("causal", op.causal.as_ref().map(|v| v.span()), &["softmax"]),
        (
            "epsilon",
            op.epsilon.as_ref().map(|v| v.span()),
            &["layernorm", "rmsnorm"],
        ),
        ("perm", op.perm.as_ref().map(|v| v.span()), &["transpose"]),
        ("shape", op.shape.as_ref().map(|v| v.span()), &["reshape"]),
        ("block", op.block.as_ref().map(|v| v.span()), &["rearrange"]),
        (
            "axis",
            op.axis.as_ref().map(|v| v.span()),
            &["slice", "concat"],
        ),
        ("start", op.start.as_ref().map(|v| v.span()), &["slice"]),
        ("end", op.end.as_ref().map(|v| v.span()), &["slice"]),
    ];
    for (key, value_span, allowed) in present {
        if let Some(value_span) = value_span {
            if !allowed.contains(&kind) {
                let help = if key == "axis" && kind.starts_with("reduce_") {
                    "reductions are over the last axis: `transpose` the axis to reduce last first"
                        .to_string()
                } else {
                    format!("`{key}` belongs to `{}` ops", allowed.join("`, `"))
                };
                return Err(site
                    .error(
                        format!("key `{key}` is not allowed for a `{kind}` op"),
                        value_span,
                    )
                    .help(help));
            }
        }
    }
    if let Some(scale) = &op.scale {
        if !matches!(kind, "softmax" | "cast") {
            return Err(site
                .error(
                    format!("key `scale` is not allowed for a `{kind}` op"),
                    scale.span(),
                )
                .help("`scale` is the FP8 scale of a cast's output, or softmax's multiplier"));
        }
    }
    Ok(())
}

fn declared_dtype(
    site: &Site,
    op: &OpAst,
) -> Result<Option<(DType, std::ops::Range<usize>)>, Diagnostic> {
    let Some(dtype) = &op.dtype else {
        return Ok(None);
    };
    match DType::from_name(dtype.get_ref()) {
        Some(d) => Ok(Some((d, dtype.span()))),
        None => Err(suggest(
            site.error(format!("unknown dtype `{}`", dtype.get_ref()), dtype.span()),
            dtype.get_ref(),
            DTYPE_NAMES,
        )
        .help("dtypes are f32, f16, f143, f152")),
    }
}

/// The output dtype: the declared one if allowed, else an error. Every
/// operation but a view declares it; `expected` is what the message
/// suggests when it is missing.
fn output_dtype(
    site: &Site,
    op: &OpAst,
    declared: Option<(DType, std::ops::Range<usize>)>,
    expected: DType,
    allowed: &[DType],
) -> Result<DType, Diagnostic> {
    match declared {
        None => Err(site
            .error(
                format!("`{}` needs the `dtype` of its output", op.op.get_ref()),
                op.op.span(),
            )
            .help(format!("add `dtype = \"{expected}\"`"))),
        Some((d, _)) if allowed.contains(&d) => Ok(d),
        Some((d, span)) => Err(site
            .error(format!("`{}` cannot produce {d}", op.op.get_ref()), span)
            .label(format!("allowed: {}", names(allowed)))),
    }
}

fn names(dtypes: &[DType]) -> String {
    dtypes
        .iter()
        .map(|d| d.name())
        .collect::<Vec<_>>()
        .join(", ")
}

fn require_dtype(
    site: &Site,
    input: &Input,
    allowed: &[DType],
    kind: &str,
) -> Result<(), Diagnostic> {
    if allowed.contains(&input.dtype) {
        return Ok(());
    }
    Err(site
        .error(
            format!(
                "dtype {} is not allowed for `{kind}` input `{}`",
                input.dtype,
                input.name.get_ref()
            ),
            input.name.span(),
        )
        .label(format!("allowed: {}", names(allowed))))
}

fn shape_text(shape: &[usize]) -> String {
    format!("{shape:?}")
}

fn matmul(
    site: &Site,
    op: &OpAst,
    inputs: &[Input],
    declared: Option<(DType, std::ops::Range<usize>)>,
) -> Result<Inferred, Diagnostic> {
    let (a, b) = (&inputs[0], &inputs[1]);
    let amp_inputs = [DType::F16, DType::F143, DType::F152];
    require_dtype(site, a, &amp_inputs, "matmul")?;
    require_dtype(site, b, &amp_inputs, "matmul")?;
    // One f16 and one FP8 operand is allowed: the f16 operand is read
    // converted to the other's FP8 format (scale 0), as a `cast` would
    // (legalization inserts that cast). Two different FP8 formats are not.
    if a.dtype.is_fp8() && b.dtype.is_fp8() && a.dtype != b.dtype {
        return Err(site
            .error(
                format!(
                    "matmul operands in two FP8 formats, {} and {}",
                    a.dtype, b.dtype
                ),
                b.name.span(),
            )
            .help("cast one operand to the other's format"));
    }
    for x in [a, b] {
        if x.shape.len() < 2 {
            return Err(site.error(
                format!(
                    "matmul operand `{}` must have at least 2 dimensions, has shape {}",
                    x.name.get_ref(),
                    shape_text(x.shape)
                ),
                x.name.span(),
            ));
        }
    }
    let transpose = op.transpose_rhs.as_ref().is_some_and(|t| *t.get_ref());
    let (m, k) = (a.shape[a.shape.len() - 2], a.shape[a.shape.len() - 1]);
    let (rb, cb) = (b.shape[b.shape.len() - 2], b.shape[b.shape.len() - 1]);
    let (bk, n) = if transpose { (cb, rb) } else { (rb, cb) };
    if bk != k {
        return Err(site
            .error(
                format!(
                    "matmul inner dimensions do not match: `{}` is {} and `{}` is {}{}",
                    a.name.get_ref(),
                    shape_text(a.shape),
                    b.name.get_ref(),
                    shape_text(b.shape),
                    if transpose { " (transposed)" } else { "" }
                ),
                b.name.span(),
            )
            .label(format!("expected inner dimension {k}, found {bk}")));
    }
    let batch_a = &a.shape[..a.shape.len() - 2];
    let batch_b = &b.shape[..b.shape.len() - 2];
    if !batch_b.is_empty() && batch_b != batch_a {
        return Err(site
            .error(
                format!(
                    "matmul batch dimensions do not match: {} and {}",
                    shape_text(batch_a),
                    shape_text(batch_b)
                ),
                b.name.span(),
            )
            .help("the right operand must be 2-D or have the same batch dimensions"));
    }
    // An f32 result comes from the GEMM that carries f32 partials; its
    // operands are read as f16 (legalization casts FP8 ones).
    let fp8_declared = declared.as_ref().is_some_and(|(d, _)| d.is_fp8());
    let out =
        output_dtype(site, op, declared, DType::F16, &[DType::F16, DType::F32]).map_err(|e| {
            match fp8_declared {
                true => e.help("produce f16 and `cast` it to the FP8 format with its scale"),
                false => e,
            }
        })?;
    let mut shape = batch_a.to_vec();
    shape.extend([m, n]);
    Ok(plain(
        OpKind::Matmul {
            transpose_rhs: transpose,
            epilogue: Vec::new(),
        },
        shape,
        out,
    ))
}

fn cast(
    site: &Site,
    op: &OpAst,
    inputs: &[Input],
    declared: Option<(DType, std::ops::Range<usize>)>,
) -> Result<Inferred, Diagnostic> {
    let x = &inputs[0];
    let Some((out, dtype_span)) = declared else {
        return Err(site
            .error("a `cast` must name its output `dtype`", op.op.span())
            .help("add `dtype = \"f143\"` (or f152, f16, f32)"));
    };
    let allowed = matches!(
        (x.dtype, out),
        (DType::F16, DType::F143 | DType::F152 | DType::F32)
            | (DType::F143 | DType::F152 | DType::F32, DType::F16)
    );
    if !allowed {
        return Err(site
            .error(
                format!("the device has no cast from {} to {out}", x.dtype),
                dtype_span,
            )
            .note("casts go between f16 and f32, f143 or f152; FP8 and f32 convert through f16"));
    }
    let scale = match &op.scale {
        Some(s) if !out.is_fp8() => {
            return Err(site.error(
                format!("`scale` only applies to FP8 outputs, not {out}"),
                s.span(),
            ))
        }
        Some(s) => fp8_scale(site, *s.get_ref(), s.span())?,
        None => 0,
    };
    Ok(Inferred {
        kind: OpKind::Cast,
        shape: x.shape.to_vec(),
        dtype: out,
        scale,
    })
}

/// Checks an FP8 scale value.
pub(super) fn fp8_scale(
    site: &Site,
    value: f64,
    span: std::ops::Range<usize>,
) -> Result<i8, Diagnostic> {
    if value.fract() != 0.0 || !FP8_SCALE_RANGE.contains(&(value as i64)) {
        return Err(site
            .error(format!("FP8 scale {value} is out of range"), span)
            .label(format!(
                "expected an integer in {}..={}",
                FP8_SCALE_RANGE.start(),
                FP8_SCALE_RANGE.end()
            )));
    }
    Ok(value as i8)
}

fn add(
    site: &Site,
    op: &OpAst,
    inputs: &[Input],
    declared: Option<(DType, std::ops::Range<usize>)>,
) -> Result<Inferred, Diagnostic> {
    let (a, b) = (&inputs[0], &inputs[1]);
    let name = op.op.get_ref().as_str();
    require_dtype(site, a, &[DType::F16, DType::F32], name)?;
    if b.dtype != a.dtype {
        return Err(site.error(
            format!(
                "{name} operands must have the same dtype, found {} and {}",
                a.dtype, b.dtype
            ),
            b.name.span(),
        ));
    }
    let Some(shape) = broadcast(a.shape, b.shape) else {
        return Err(site
            .error(
                format!(
                    "shapes {} and {} do not broadcast",
                    shape_text(a.shape),
                    shape_text(b.shape)
                ),
                b.name.span(),
            )
            .note("NumPy rules: trailing dimensions must be equal or 1"));
    };
    let out = output_dtype(site, op, declared, a.dtype, &[a.dtype])?;
    let kind = match name {
        "mul" => OpKind::Mul,
        "sub" => OpKind::Sub,
        "div" => OpKind::Div,
        _ => OpKind::Add,
    };
    Ok(plain(kind, shape, out))
}

/// `rmsnorm(x, gamma)`: f16 in and out, `gamma` over the last axis.
fn rmsnorm(
    site: &Site,
    op: &OpAst,
    inputs: &[Input],
    declared: Option<(DType, std::ops::Range<usize>)>,
) -> Result<Inferred, Diagnostic> {
    let (x, gamma) = (&inputs[0], &inputs[1]);
    require_dtype(site, x, &[DType::F16], "rmsnorm")?;
    require_dtype(site, gamma, &[DType::F16], "rmsnorm")?;
    let width = *x.shape.last().unwrap_or(&0);
    if gamma.shape != [width] {
        return Err(site
            .error(
                format!(
                    "rmsnorm parameter `{}` has shape {}, expected [{width}]",
                    gamma.name.get_ref(),
                    shape_text(gamma.shape)
                ),
                gamma.name.span(),
            )
            .note("inputs are x and gamma; gamma matches x's last axis"));
    }
    let epsilon = op.epsilon.as_ref().map_or(1e-6, |e| *e.get_ref());
    if !(epsilon > 0.0 && (epsilon as f32).is_finite() && epsilon as f32 > 0.0) {
        return Err(site.error(
            "rmsnorm `epsilon` must be positive within f32 range",
            span(&op.epsilon),
        ));
    }
    let out = output_dtype(site, op, declared, DType::F16, &[DType::F16])?;
    Ok(plain(
        OpKind::Rmsnorm {
            epsilon: epsilon as f32,
        },
        x.shape.to_vec(),
        out,
    ))
}

/// NumPy broadcasting of two shapes.
pub fn broadcast(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    let dim = |s: &[usize], i: usize| {
        let pad = rank - s.len();
        if i < pad {
            1
        } else {
            s[i - pad]
        }
    };
    (0..rank)
        .map(|i| match (dim(a, i), dim(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

fn layernorm(
    site: &Site,
    op: &OpAst,
    inputs: &[Input],
    declared: Option<(DType, std::ops::Range<usize>)>,
) -> Result<Inferred, Diagnostic> {
    let x = &inputs[0];
    require_dtype(site, x, &[DType::F16], "layernorm")?;
    let width = *x.shape.last().unwrap_or(&0);
    for p in &inputs[1..] {
        require_dtype(site, p, &[DType::F16], "layernorm")?;
        if p.shape != [width] {
            return Err(site
                .error(
                    format!(
                        "layernorm parameter `{}` has shape {}, expected [{width}]",
                        p.name.get_ref(),
                        shape_text(p.shape)
                    ),
                    p.name.span(),
                )
                .note("inputs are x, gamma, beta; gamma and beta match x's last axis"));
        }
    }
    let epsilon = op.epsilon.as_ref().map_or(1e-5, |e| *e.get_ref());
    if !(epsilon > 0.0 && (epsilon as f32).is_finite() && epsilon as f32 > 0.0) {
        return Err(site.error(
            "layernorm `epsilon` must be positive within f32 range",
            span(&op.epsilon),
        ));
    }
    let out = output_dtype(site, op, declared, DType::F16, &[DType::F16])?;
    Ok(plain(
        OpKind::Layernorm {
            epsilon: epsilon as f32,
        },
        x.shape.to_vec(),
        out,
    ))
}

/// A view's dtype: its input's, which it may repeat.
fn same_dtype(
    site: &Site,
    op: &OpAst,
    x: &Input,
    declared: Option<(DType, std::ops::Range<usize>)>,
) -> Result<DType, Diagnostic> {
    match declared {
        None => Ok(x.dtype),
        declared => output_dtype(site, op, declared, x.dtype, &[x.dtype]),
    }
}

fn transpose(
    site: &Site,
    op: &OpAst,
    inputs: &[Input],
    declared: Option<(DType, std::ops::Range<usize>)>,
) -> Result<Inferred, Diagnostic> {
    let x = &inputs[0];
    let dtype = same_dtype(site, op, x, declared)?;
    let Some(perm) = &op.perm else {
        return Err(site.error("a `transpose` needs `perm`", op.op.span()));
    };
    let values: Vec<i64> = perm.get_ref().iter().map(|v| *v.get_ref()).collect();
    let mut seen = vec![false; x.shape.len()];
    let valid = values.len() == x.shape.len()
        && values.iter().all(|&p| {
            usize::try_from(p)
                .ok()
                .filter(|&p| p < seen.len() && !seen[p])
                .map(|p| seen[p] = true)
                .is_some()
        });
    if !valid {
        return Err(site.error(
            format!(
                "`perm` {values:?} is not a permutation of the {} axes of `{}`",
                x.shape.len(),
                x.name.get_ref()
            ),
            perm.span(),
        ));
    }
    let perm: Vec<usize> = values.iter().map(|&p| p as usize).collect();
    let shape = perm.iter().map(|&p| x.shape[p]).collect();
    Ok(view(OpKind::Transpose { perm }, shape, dtype, x))
}

fn reshape(
    site: &Site,
    op: &OpAst,
    inputs: &[Input],
    declared: Option<(DType, std::ops::Range<usize>)>,
) -> Result<Inferred, Diagnostic> {
    let x = &inputs[0];
    let dtype = same_dtype(site, op, x, declared)?;
    let Some(shape) = &op.shape else {
        return Err(site.error("a `reshape` needs `shape`", op.op.span()));
    };
    let total: usize = x.shape.iter().product();
    let dims: Vec<i64> = shape.get_ref().iter().map(|d| *d.get_ref()).collect();
    if dims.is_empty() || dims.len() > crate::graph::MAX_RANK {
        return Err(site.error(
            format!(
                "a reshape needs 1 to {} dimensions, found {}",
                crate::graph::MAX_RANK,
                dims.len()
            ),
            shape.span(),
        ));
    }
    let inferred = dims.iter().filter(|&&d| d == -1).count();
    let known: Option<usize> = dims
        .iter()
        .filter(|&&d| d != -1)
        .try_fold(1usize, |acc, &d| {
            usize::try_from(d)
                .ok()
                .filter(|&d| d > 0)
                .and_then(|d| acc.checked_mul(d))
        });
    let resolved = match (known, inferred) {
        (Some(k), 0) if k == total => Some(dims.iter().map(|&d| d as usize).collect::<Vec<_>>()),
        (Some(k), 1) if k > 0 && total.is_multiple_of(k) => Some(
            dims.iter()
                .map(|&d| if d == -1 { total / k } else { d as usize })
                .collect(),
        ),
        _ => None,
    };
    match resolved {
        Some(shape) => Ok(view(OpKind::Reshape, shape, dtype, x)),
        None => Err(site
            .error(
                format!(
                    "cannot reshape `{}` of shape {} ({total} elements) to {dims:?}",
                    x.name.get_ref(),
                    shape_text(x.shape)
                ),
                shape.span(),
            )
            .note("dimensions must be positive, at most one may be -1, and the element count must stay the same")),
    }
}

fn rearrange(
    site: &Site,
    op: &OpAst,
    inputs: &[Input],
    declared: Option<(DType, std::ops::Range<usize>)>,
) -> Result<Inferred, Diagnostic> {
    let x = &inputs[0];
    require_dtype(site, x, &[DType::F16], "rearrange")?;
    let dtype = output_dtype(site, op, declared, x.dtype, &[x.dtype])?;
    let Some(block) = &op.block else {
        return Err(site.error(
            "a `rearrange` needs `block = [rows, columns]`",
            op.op.span(),
        ));
    };
    let values: Vec<i64> = block.get_ref().iter().map(|v| *v.get_ref()).collect();
    let [r, c] = values[..] else {
        return Err(site.error("`block` must be [rows, columns]", block.span()));
    };
    let rank = x.shape.len();
    let fits = r > 0
        && c > 0
        && rank >= 2
        && x.shape[rank - 2].is_multiple_of(r as usize)
        && x.shape[rank - 1].is_multiple_of(c as usize);
    if !fits {
        return Err(site.error(
            format!(
                "block [{r}, {c}] does not tile the last two axes of `{}` (shape {})",
                x.name.get_ref(),
                shape_text(x.shape)
            ),
            block.span(),
        ));
    }
    Ok(plain(
        OpKind::Rearrange {
            block: [r as usize, c as usize],
        },
        x.shape.to_vec(),
        dtype,
    ))
}
/// Every dtype name, for suggestions.
pub(super) const DTYPE_NAMES: &[&str] = &["f32", "f16", "f143", "f152"];

/// Adds a "did you mean" help to `diagnostic` when one of `known` is close
/// to `name`.
pub(super) fn suggest(diagnostic: Diagnostic, name: &str, known: &[&str]) -> Diagnostic {
    match crate::suggest::did_you_mean(name, known.iter().copied()) {
        Some(help) => diagnostic.help(help),
        None => diagnostic,
    }
}

/// `slice`: indices `start..end` of one axis, a view of its input. `axis`
/// may count from the last (-1); `start` defaults to 0 and `end` to the
/// axis's extent, and the range kept must be non-empty.
fn slice(
    site: &Site,
    op: &OpAst,
    inputs: &[Input],
    declared: Option<(DType, std::ops::Range<usize>)>,
) -> Result<Inferred, Diagnostic> {
    let x = &inputs[0];
    let dtype = same_dtype(site, op, x, declared)?;
    let axis = required_axis(site, op, x, "`axis = -2` cuts the second-to-last axis")?;
    let extent = x.shape[axis];
    let start = op.start.as_ref().map_or(0, |s| *s.get_ref());
    let end = op.end.as_ref().map_or(extent as i64, |e| *e.get_ref());
    if start < 0 || start >= extent as i64 {
        return Err(site.error(
            format!(
                "`start` {start} is outside axis {axis} of `{}` (0..{extent})",
                x.name.get_ref()
            ),
            span(&op.start),
        ));
    }
    if end <= start || end > extent as i64 {
        return Err(site
            .error(
                format!(
                    "`end` {end} must be in {}..={extent}, after `start` {start}",
                    start + 1
                ),
                span(&op.end),
            )
            .note(format!(
                "axis {axis} of `{}` has {extent} entries",
                x.name.get_ref()
            )));
    }
    let mut shape = x.shape.to_vec();
    shape[axis] = (end - start) as usize;
    let kind = OpKind::Slice {
        axis,
        start: start as usize,
    };
    Ok(view(kind, shape, dtype, x))
}

fn too_few_to_concat(site: &Site, op: &OpAst, found: usize) -> Diagnostic {
    site.error(
        format!("`concat` takes at least 2 inputs, found {found}"),
        op.inputs.span(),
    )
    .label("expected 2 or more")
}

/// The op's `axis` resolved against `x`'s rank (negative counts from the
/// last), or a located error when it is missing (with `help`) or out of
/// range.
fn required_axis(site: &Site, op: &OpAst, x: &Input, help: &str) -> Result<usize, Diagnostic> {
    let Some(axis) = &op.axis else {
        return Err(site
            .error(
                format!("a `{}` needs `axis`", op.op.get_ref()),
                op.op.span(),
            )
            .help(help.to_string()));
    };
    let rank = x.shape.len() as i64;
    let value = *axis.get_ref();
    let resolved = if value < 0 { value + rank } else { value };
    if !(0..rank).contains(&resolved) {
        return Err(site.error(
            format!(
                "`axis` {value} is out of range for `{}` of rank {rank}",
                x.name.get_ref()
            ),
            axis.span(),
        ));
    }
    Ok(resolved as usize)
}

/// `concat`: two or more inputs joined along `axis` (negative counts from
/// the last). They must have one rank, equal extents on every other axis,
/// one dtype and, for FP8, one scale, which the output keeps: the device
/// copies the values, it does not convert them.
fn concat(
    site: &Site,
    op: &OpAst,
    inputs: &[Input],
    declared: Option<(DType, std::ops::Range<usize>)>,
) -> Result<Inferred, Diagnostic> {
    let [first, rest @ ..] = inputs else {
        return Err(too_few_to_concat(site, op, 0));
    };
    if rest.is_empty() {
        return Err(
            too_few_to_concat(site, op, 1).help("a single input needs no concat: read it directly")
        );
    }
    let axis = required_axis(
        site,
        op,
        first,
        "`axis = 0` stacks rows, `axis = -1` joins along the last axis",
    )?;
    let mut shape = first.shape.to_vec();
    for x in rest {
        if x.dtype != first.dtype {
            return Err(site
                .error(
                    format!(
                        "concat inputs must have one dtype: `{}` is {}, `{}` is {}",
                        first.name.get_ref(),
                        first.dtype,
                        x.name.get_ref(),
                        x.dtype
                    ),
                    x.name.span(),
                )
                .help("cast one of them first"));
        }
        if x.scale != first.scale {
            return Err(site
                .error(
                    format!(
                        "concat inputs must have one FP8 scale: `{}` has 2^{}, `{}` has 2^{}",
                        first.name.get_ref(),
                        first.scale,
                        x.name.get_ref(),
                        x.scale
                    ),
                    x.name.span(),
                )
                .note("the device copies FP8 codes unchanged, so they must mean the same values")
                .help("cast through f16 to a common scale"));
        }
        let mismatch = x.shape.len() != first.shape.len()
            || (0..first.shape.len()).any(|d| d != axis && x.shape[d] != first.shape[d]);
        if mismatch {
            return Err(site
                .error(
                    format!(
                        "`{}` {} does not fit `{}` {} along axis {axis}",
                        x.name.get_ref(),
                        shape_text(x.shape),
                        first.name.get_ref(),
                        shape_text(first.shape)
                    ),
                    x.name.span(),
                )
                .note(format!(
                    "concat inputs must have rank {} and equal extents on every axis but {axis}",
                    first.shape.len()
                )));
        }
        shape[axis] += x.shape[axis];
    }
    let dtype = output_dtype(site, op, declared, first.dtype, &[first.dtype])?;
    Ok(Inferred {
        kind: OpKind::Concat { axis },
        shape,
        dtype,
        scale: first.scale,
    })
}
