//! Integer expressions: parsed once, evaluated against a symbol resolver.
//!
//! The preprocessor evaluates `#if` conditions with plain integers; the
//! assembler evaluates operands whose value may be a symbol plus a constant
//! (to become a relocation), so values are [`Val`]s: a constant or a symbol
//! reference with an addend. Only `+` and `-` may carry a symbol; the
//! difference of two labels in the same section is a constant.

use super::lex::{Tok, Token};
use super::limits::MAX_EXPRESSION_DEPTH;
use std::ops::Range;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Expr {
    Int(i64, Range<usize>),
    Sym(String, Range<usize>),
    Unary(&'static str, Box<Expr>, Range<usize>),
    Binary(&'static str, Box<Expr>, Box<Expr>, Range<usize>),
    Cond(Box<Expr>, Box<Expr>, Box<Expr>, Range<usize>),
}

impl Expr {
    pub(super) fn span(&self) -> Range<usize> {
        match self {
            Expr::Int(_, s)
            | Expr::Sym(_, s)
            | Expr::Unary(_, _, s)
            | Expr::Binary(_, _, _, s)
            | Expr::Cond(_, _, _, s) => s.clone(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum EvalErrorKind {
    /// Malformed, non-constant where a constant is needed, division by
    /// zero, a result that does not fit 64 bits.
    Bad,
    Undefined,
    /// Nested deeper than [`MAX_EXPRESSION_DEPTH`].
    TooDeep,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct EvalError {
    pub kind: EvalErrorKind,
    pub message: String,
    pub span: Range<usize>,
}

impl EvalError {
    pub(super) fn bad(message: impl Into<String>, span: Range<usize>) -> EvalError {
        EvalError {
            kind: EvalErrorKind::Bad,
            message: message.into(),
            span,
        }
    }
}

/// A symbol a value is relative to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Base {
    pub symbol: String,
    /// The section of a label defined in this assembly; `None` for an
    /// external symbol.
    pub section: Option<usize>,
    /// The label's offset in its section (0 for externals).
    pub offset: i64,
}

/// A value: `base + addend`, or just `addend`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Val {
    pub base: Option<Base>,
    pub addend: i64,
}

impl Val {
    pub(super) fn constant(value: i64) -> Val {
        Val {
            base: None,
            addend: value,
        }
    }

    pub(super) fn as_const(&self) -> Option<i64> {
        self.base.is_none().then_some(self.addend)
    }
}

/// Parses tokens as one expression; returns it and the number of tokens used.
pub(super) fn parse(tokens: &[Token], end_of_line: usize) -> Result<(Expr, usize), EvalError> {
    let mut parser = Parser {
        tokens,
        at: 0,
        end_of_line,
        nesting: 0,
    };
    let (expr, _) = parser.conditional()?;
    Ok((expr, parser.at))
}

/// Parses exactly the given tokens as one expression.
pub(super) fn parse_all(tokens: &[Token], end_of_line: usize) -> Result<Expr, EvalError> {
    let (expr, used) = parse(tokens, end_of_line)?;
    match tokens.get(used) {
        None => Ok(expr),
        Some(extra) => Err(EvalError::bad(
            "unexpected token after expression",
            extra.span.clone(),
        )),
    }
}

/// A recursive-descent parser whose results carry their tree depth, so
/// that neither parsing nor evaluating (nor dropping) an expression can
/// recurse without bound.
struct Parser<'a> {
    tokens: &'a [Token],
    at: usize,
    end_of_line: usize,
    /// Open `conditional` and prefix-operator calls: the parser's own
    /// recursion.
    nesting: usize,
}

/// An expression and the depth of its tree.
type Parsed = (Expr, usize);

const LEVELS: [&[&str]; 10] = [
    &["||"],
    &["&&"],
    &["|"],
    &["^"],
    &["&"],
    &["==", "!="],
    &["<", ">", "<=", ">="],
    &["<<", ">>"],
    &["+", "-"],
    &["*", "/", "%"],
];

impl Parser<'_> {
    fn peek_punct(&self) -> Option<&'static str> {
        match self.tokens.get(self.at).map(|t| &t.tok) {
            Some(Tok::Punct(p)) => Some(p),
            _ => None,
        }
    }

    fn here(&self) -> Range<usize> {
        self.tokens
            .get(self.at)
            .map_or(self.end_of_line..self.end_of_line + 1, |t| t.span.clone())
    }

    /// The error for an expression deeper than the limit, at the token
    /// where it went too deep.
    fn too_deep(&self) -> EvalError {
        EvalError {
            kind: EvalErrorKind::TooDeep,
            message: format!("expression nested deeper than {MAX_EXPRESSION_DEPTH} levels"),
            span: self.here(),
        }
    }

    /// Runs `parse` one level deeper in the parser's recursion.
    fn nested(
        &mut self,
        parse: impl FnOnce(&mut Self) -> Result<Parsed, EvalError>,
    ) -> Result<Parsed, EvalError> {
        if self.nesting >= MAX_EXPRESSION_DEPTH {
            return Err(self.too_deep());
        }
        self.nesting += 1;
        let result = parse(self);
        self.nesting -= 1;
        result
    }

    /// A node over children of depth `depth`, refused past the limit.
    fn node(&self, expr: Expr, depth: usize) -> Result<Parsed, EvalError> {
        if depth >= MAX_EXPRESSION_DEPTH {
            return Err(EvalError {
                span: expr.span(),
                ..self.too_deep()
            });
        }
        Ok((expr, depth + 1))
    }

    fn conditional(&mut self) -> Result<Parsed, EvalError> {
        self.nested(Self::conditional_here)
    }

    fn conditional_here(&mut self) -> Result<Parsed, EvalError> {
        let (condition, c) = self.binary(0)?;
        if self.peek_punct() != Some("?") {
            return Ok((condition, c));
        }
        self.at += 1;
        let (then, t) = self.conditional()?;
        if self.peek_punct() != Some(":") {
            return Err(EvalError::bad("expected `:` in `?:`", self.here()));
        }
        self.at += 1;
        let (otherwise, o) = self.conditional()?;
        let span = condition.span().start..otherwise.span().end;
        self.node(
            Expr::Cond(
                Box::new(condition),
                Box::new(then),
                Box::new(otherwise),
                span,
            ),
            c.max(t).max(o),
        )
    }

    fn binary(&mut self, level: usize) -> Result<Parsed, EvalError> {
        if level == LEVELS.len() {
            return self.unary();
        }
        let (mut left, mut depth) = self.binary(level + 1)?;
        while let Some(op) = self.peek_punct().filter(|p| LEVELS[level].contains(p)) {
            self.at += 1;
            let (right, r) = self.binary(level + 1)?;
            let span = left.span().start..right.span().end;
            (left, depth) = self.node(
                Expr::Binary(op, Box::new(left), Box::new(right), span),
                depth.max(r),
            )?;
        }
        Ok((left, depth))
    }

    fn unary(&mut self) -> Result<Parsed, EvalError> {
        let start = self.here();
        match self.peek_punct() {
            Some(op @ ("-" | "~" | "!" | "+")) => {
                self.at += 1;
                let (operand, depth) = self.nested(Self::unary)?;
                let span = start.start..operand.span().end;
                self.node(Expr::Unary(op, Box::new(operand), span), depth)
            }
            Some("(") => {
                self.at += 1;
                let (inner, depth) = self.conditional()?;
                if self.peek_punct() != Some(")") {
                    return Err(EvalError::bad("expected `)`", self.here()));
                }
                let span = start.start..self.tokens[self.at].span.end;
                self.at += 1;
                // A unary `+` keeps the parentheses in the span.
                self.node(Expr::Unary("+", Box::new(inner), span), depth)
            }
            _ => {
                let token = self
                    .tokens
                    .get(self.at)
                    .ok_or_else(|| EvalError::bad("expected an expression", self.here()))?;
                let expr = match &token.tok {
                    Tok::Int(v) => Expr::Int(*v, token.span.clone()),
                    Tok::Ident(name) => Expr::Sym(name.clone(), token.span.clone()),
                    Tok::Reg(_) => {
                        return Err(EvalError::bad(
                            "a register is not allowed in an expression",
                            token.span.clone(),
                        ))
                    }
                    _ => return Err(EvalError::bad("expected an expression", token.span.clone())),
                };
                self.at += 1;
                Ok((expr, 1))
            }
        }
    }
}

/// Gives the value of a symbol named at a span.
pub(super) type Resolver<'a> = dyn FnMut(&str, Range<usize>) -> Result<Val, EvalError> + 'a;

/// Evaluates `expr`, asking `resolve` for the value of each symbol.
pub(super) fn eval(expr: &Expr, resolve: &mut Resolver<'_>) -> Result<Val, EvalError> {
    match expr {
        Expr::Int(v, _) => Ok(Val::constant(*v)),
        Expr::Sym(name, span) => resolve(name, span.clone()),
        Expr::Unary(op, operand, span) => {
            let value = eval(operand, resolve)?;
            if *op == "+" {
                return Ok(value);
            }
            let v = constant(&value, span, op)?;
            Ok(Val::constant(match *op {
                "-" => v.checked_neg().ok_or_else(|| overflow(op, span))?,
                "~" => !v,
                _ => i64::from(v == 0),
            }))
        }
        Expr::Cond(condition, then, otherwise, span) => {
            let c = constant(&eval(condition, resolve)?, span, "?:")?;
            if c != 0 {
                eval(then, resolve)
            } else {
                eval(otherwise, resolve)
            }
        }
        Expr::Binary(op, left, right, span) => {
            let l = eval(left, resolve)?;
            let r = eval(right, resolve)?;
            binary(op, l, r, span)
        }
    }
}

fn constant(value: &Val, span: &Range<usize>, op: &str) -> Result<i64, EvalError> {
    value.as_const().ok_or_else(|| {
        EvalError::bad(
            format!("`{op}` needs constant operands, not a symbol address"),
            span.clone(),
        )
    })
}

/// The error for arithmetic whose result does not fit 64 bits: values
/// never wrap silently.
fn overflow(op: &str, span: &Range<usize>) -> EvalError {
    EvalError::bad(
        format!("`{op}` overflows: the result does not fit in 64 bits"),
        span.clone(),
    )
}

fn binary(op: &str, l: Val, r: Val, span: &Range<usize>) -> Result<Val, EvalError> {
    let add = |a: i64, b: i64| a.checked_add(b).ok_or_else(|| overflow(op, span));
    let sub = |a: i64, b: i64| a.checked_sub(b).ok_or_else(|| overflow(op, span));
    match op {
        "+" => match (&l.base, &r.base) {
            (Some(_), Some(_)) => Err(EvalError::bad(
                "cannot add two symbol addresses",
                span.clone(),
            )),
            (Some(_), None) => Ok(Val {
                addend: add(l.addend, r.addend)?,
                base: l.base,
            }),
            _ => Ok(Val {
                addend: add(l.addend, r.addend)?,
                base: r.base,
            }),
        },
        "-" => match (&l.base, &r.base) {
            (_, None) => Ok(Val {
                addend: sub(l.addend, r.addend)?,
                base: l.base,
            }),
            (Some(a), Some(b))
                if a.section.is_some() && a.section == b.section
                    || a.section.is_none() && b.section.is_none() && a.symbol == b.symbol =>
            {
                Ok(Val::constant(sub(
                    add(a.offset, l.addend)?,
                    add(b.offset, r.addend)?,
                )?))
            }
            _ => Err(EvalError::bad(
                "the difference of symbols in different sections is not a constant",
                span.clone(),
            )),
        },
        _ => {
            let a = constant(&l, span, op)?;
            let b = constant(&r, span, op)?;
            let value = match op {
                "*" => a.checked_mul(b).ok_or_else(|| overflow(op, span))?,
                "/" | "%" if b == 0 => {
                    return Err(EvalError::bad("division by zero", span.clone()))
                }
                "/" => a.checked_div(b).ok_or_else(|| overflow(op, span))?,
                "%" => a.checked_rem(b).ok_or_else(|| overflow(op, span))?,
                "<<" | ">>" if !(0..64).contains(&b) => {
                    return Err(EvalError::bad(
                        format!("shift by {b} is outside 0..64"),
                        span.clone(),
                    ))
                }
                "<<" => a.wrapping_shl(b as u32),
                ">>" => a.wrapping_shr(b as u32),
                "&" => a & b,
                "|" => a | b,
                "^" => a ^ b,
                "==" => i64::from(a == b),
                "!=" => i64::from(a != b),
                "<" => i64::from(a < b),
                ">" => i64::from(a > b),
                "<=" => i64::from(a <= b),
                ">=" => i64::from(a >= b),
                "&&" => i64::from(a != 0 && b != 0),
                "||" => i64::from(a != 0 || b != 0),
                _ => {
                    return Err(EvalError::bad(
                        format!("unknown operator `{op}`"),
                        span.clone(),
                    ))
                }
            };
            Ok(Val::constant(value))
        }
    }
}

/// Checks that every part of `expr` that names no symbol evaluates: a
/// cost formula like `"K / 0"` is refused when it is assembled, not when
/// some variant is costed.
pub(super) fn check_constant_parts(expr: &Expr) -> Result<(), EvalError> {
    fn walk(expr: &Expr) -> Result<bool, EvalError> {
        let names_a_symbol = match expr {
            Expr::Int(..) => false,
            Expr::Sym(..) => true,
            Expr::Unary(_, operand, _) => walk(operand)?,
            Expr::Binary(_, left, right, _) => walk(left)? | walk(right)?,
            Expr::Cond(condition, then, otherwise, _) => {
                walk(condition)? | walk(then)? | walk(otherwise)?
            }
        };
        if !names_a_symbol {
            eval_const(expr, &|_| None)?;
        }
        Ok(names_a_symbol)
    }
    walk(expr).map(|_| ())
}

/// Evaluates a constant expression where every symbol comes from `lookup`
/// (used for `#if` and for cost formulas).
pub(super) fn eval_const(
    expr: &Expr,
    lookup: &dyn Fn(&str) -> Option<i64>,
) -> Result<i64, EvalError> {
    let value = eval(expr, &mut |name, span| {
        lookup(name).map(Val::constant).ok_or(EvalError {
            kind: EvalErrorKind::Undefined,
            message: format!("unknown name `{name}`"),
            span,
        })
    })?;
    Ok(value.addend)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::asm::lex::lex;

    fn value(text: &str) -> Result<i64, String> {
        let tokens = lex(text).map_err(|e| e.message)?;
        let expr = parse_all(&tokens, text.len()).map_err(|e| e.message)?;
        eval_const(&expr, &|name| (name == "K").then_some(32)).map_err(|e| e.message)
    }

    #[test]
    fn precedence_follows_c() {
        assert_eq!(value("1 + 2 * 3"), Ok(7));
        assert_eq!(value("(1 + 2) * 3"), Ok(9));
        assert_eq!(value("1 << 4 | 1"), Ok(17));
        assert_eq!(value("K / 8 - 1"), Ok(3));
        assert_eq!(value("~0 & 0xff"), Ok(255));
        assert_eq!(value("-7 % 3"), Ok(-1));
        assert_eq!(value("K == 32 && !0 ? 5 : 6"), Ok(5));
        assert_eq!(value("6 ^ 3"), Ok(5));
        assert_eq!(value("8 >> 2 >= 2"), Ok(1));
    }

    #[test]
    fn errors_name_the_problem() {
        assert_eq!(value("1 / 0"), Err("division by zero".into()));
        assert_eq!(value("(1 + 2"), Err("expected `)`".into()));
        assert_eq!(value("1 +"), Err("expected an expression".into()));
        assert_eq!(value("N + 1"), Err("unknown name `N`".into()));
        assert_eq!(
            value("1 2"),
            Err("unexpected token after expression".into())
        );
    }

    #[test]
    fn arithmetic_never_wraps() {
        let overflows = |op: &str| {
            Err(format!(
                "`{op}` overflows: the result does not fit in 64 bits"
            ))
        };
        assert_eq!(
            value("9223372036854775807 * 9223372036854775807"),
            overflows("*")
        );
        assert_eq!(value("9223372036854775807 + 1"), overflows("+"));
        assert_eq!(value("-9223372036854775807 - 2"), overflows("-"));
        assert_eq!(value("(-9223372036854775807 - 1) / -1"), overflows("/"));
        assert_eq!(value("-(-9223372036854775807 - 1)"), overflows("-"));
        assert_eq!(value("9223372036854775807 - 1"), Ok(9223372036854775806));
    }

    #[test]
    fn depth_is_limited_however_the_expression_nests() {
        let depth_error = |text: &str| {
            let tokens = lex(text).expect("lexes");
            parse_all(&tokens, text.len()).expect_err("too deep")
        };
        let deep =
            |open: &str, close: &str, n: usize| format!("{}1{}", open.repeat(n), close.repeat(n));
        // Just inside the limit, each shape parses and evaluates.
        assert_eq!(value(&deep("(", ")", MAX_EXPRESSION_DEPTH - 2)), Ok(1));
        assert_eq!(value(&deep("-", "", MAX_EXPRESSION_DEPTH - 2)), Ok(1));
        for text in [
            deep("(", ")", 3000),
            deep("-", "", 100_000),
            deep("~", "", MAX_EXPRESSION_DEPTH + 1),
            format!("1{}", " + 1".repeat(100_000)),
            format!("{}1", "1 ? ".repeat(3000)) + &" : 0".repeat(3000),
        ] {
            let error = depth_error(&text);
            assert_eq!(error.kind, EvalErrorKind::TooDeep, "{}", &text[..20]);
            assert_eq!(
                error.message,
                format!("expression nested deeper than {MAX_EXPRESSION_DEPTH} levels")
            );
            assert!(error.span.end <= text.len() + 1);
        }
    }

    #[test]
    fn constant_parts_of_a_formula_must_evaluate() {
        let check = |text: &str| {
            let tokens = lex(text).expect("lexes");
            let expr = parse_all(&tokens, text.len()).expect("parses");
            check_constant_parts(&expr).map_err(|e| e.message)
        };
        assert_eq!(check("1 / 0"), Err("division by zero".into()));
        assert_eq!(check("K * (4 % (2 - 2))"), Err("division by zero".into()));
        assert_eq!(check("K / C + 40"), Ok(()));
        assert_eq!(check("K * 128 / 4"), Ok(()));
    }
}
