//! Integer expressions: parsed once, evaluated against a symbol resolver.
//!
//! The preprocessor evaluates `#if` conditions with plain integers; the
//! assembler evaluates operands whose value may be a symbol plus a constant
//! (to become a relocation), so values are [`Val`]s: a constant or a symbol
//! reference with an addend. Only `+` and `-` may carry a symbol; the
//! difference of two labels in the same section is a constant.

use super::lex::{Tok, Token};
use std::ops::Range;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expr {
    Int(i64, Range<usize>),
    Sym(String, Range<usize>),
    Unary(&'static str, Box<Expr>, Range<usize>),
    Binary(&'static str, Box<Expr>, Box<Expr>, Range<usize>),
    Cond(Box<Expr>, Box<Expr>, Box<Expr>, Range<usize>),
}

impl Expr {
    pub fn span(&self) -> Range<usize> {
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
pub enum EvalErrorKind {
    /// Malformed, non-constant where a constant is needed, division by zero.
    Bad,
    Undefined,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvalError {
    pub kind: EvalErrorKind,
    pub message: String,
    pub span: Range<usize>,
}

impl EvalError {
    pub fn bad(message: impl Into<String>, span: Range<usize>) -> EvalError {
        EvalError {
            kind: EvalErrorKind::Bad,
            message: message.into(),
            span,
        }
    }
}

/// A symbol a value is relative to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Base {
    pub symbol: String,
    /// The section of a label defined in this assembly; `None` for an
    /// external symbol.
    pub section: Option<usize>,
    /// The label's offset in its section (0 for externals).
    pub offset: i64,
}

/// A value: `base + addend`, or just `addend`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Val {
    pub base: Option<Base>,
    pub addend: i64,
}

impl Val {
    pub fn constant(value: i64) -> Val {
        Val {
            base: None,
            addend: value,
        }
    }

    pub fn as_const(&self) -> Option<i64> {
        self.base.is_none().then_some(self.addend)
    }
}

/// Parses tokens as one expression; returns it and the number of tokens used.
pub fn parse(tokens: &[Token], end_of_line: usize) -> Result<(Expr, usize), EvalError> {
    let mut parser = Parser {
        tokens,
        at: 0,
        end_of_line,
    };
    let expr = parser.conditional()?;
    Ok((expr, parser.at))
}

/// Parses exactly the given tokens as one expression.
pub fn parse_all(tokens: &[Token], end_of_line: usize) -> Result<Expr, EvalError> {
    let (expr, used) = parse(tokens, end_of_line)?;
    match tokens.get(used) {
        None => Ok(expr),
        Some(extra) => Err(EvalError::bad(
            "unexpected token after expression",
            extra.span.clone(),
        )),
    }
}

struct Parser<'a> {
    tokens: &'a [Token],
    at: usize,
    end_of_line: usize,
}

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

    fn conditional(&mut self) -> Result<Expr, EvalError> {
        let condition = self.binary(0)?;
        if self.peek_punct() != Some("?") {
            return Ok(condition);
        }
        self.at += 1;
        let then = self.conditional()?;
        if self.peek_punct() != Some(":") {
            return Err(EvalError::bad("expected `:` in `?:`", self.here()));
        }
        self.at += 1;
        let otherwise = self.conditional()?;
        let span = condition.span().start..otherwise.span().end;
        Ok(Expr::Cond(
            Box::new(condition),
            Box::new(then),
            Box::new(otherwise),
            span,
        ))
    }

    fn binary(&mut self, level: usize) -> Result<Expr, EvalError> {
        if level == LEVELS.len() {
            return self.unary();
        }
        let mut left = self.binary(level + 1)?;
        while let Some(op) = self.peek_punct().filter(|p| LEVELS[level].contains(p)) {
            self.at += 1;
            let right = self.binary(level + 1)?;
            let span = left.span().start..right.span().end;
            left = Expr::Binary(op, Box::new(left), Box::new(right), span);
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, EvalError> {
        let start = self.here();
        match self.peek_punct() {
            Some(op @ ("-" | "~" | "!" | "+")) => {
                self.at += 1;
                let operand = self.unary()?;
                let span = start.start..operand.span().end;
                Ok(Expr::Unary(op, Box::new(operand), span))
            }
            Some("(") => {
                self.at += 1;
                let inner = self.conditional()?;
                if self.peek_punct() != Some(")") {
                    return Err(EvalError::bad("expected `)`", self.here()));
                }
                let span = start.start..self.tokens[self.at].span.end;
                self.at += 1;
                // A unary `+` keeps the parentheses in the span.
                Ok(Expr::Unary("+", Box::new(inner), span))
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
                Ok(expr)
            }
        }
    }
}

/// Gives the value of a symbol named at a span.
pub type Resolver<'a> = dyn FnMut(&str, Range<usize>) -> Result<Val, EvalError> + 'a;

/// Evaluates `expr`, asking `resolve` for the value of each symbol.
pub fn eval(expr: &Expr, resolve: &mut Resolver<'_>) -> Result<Val, EvalError> {
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
                "-" => v.wrapping_neg(),
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

fn binary(op: &str, l: Val, r: Val, span: &Range<usize>) -> Result<Val, EvalError> {
    match op {
        "+" => match (&l.base, &r.base) {
            (Some(_), Some(_)) => Err(EvalError::bad(
                "cannot add two symbol addresses",
                span.clone(),
            )),
            (Some(_), None) => Ok(Val {
                base: l.base,
                addend: l.addend.wrapping_add(r.addend),
            }),
            _ => Ok(Val {
                base: r.base,
                addend: l.addend.wrapping_add(r.addend),
            }),
        },
        "-" => match (&l.base, &r.base) {
            (_, None) => Ok(Val {
                base: l.base,
                addend: l.addend.wrapping_sub(r.addend),
            }),
            (Some(a), Some(b))
                if a.section.is_some() && a.section == b.section
                    || a.section.is_none() && b.section.is_none() && a.symbol == b.symbol =>
            {
                Ok(Val::constant(
                    (a.offset + l.addend).wrapping_sub(b.offset + r.addend),
                ))
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
                "*" => a.wrapping_mul(b),
                "/" | "%" if b == 0 => {
                    return Err(EvalError::bad("division by zero", span.clone()))
                }
                "/" => a.wrapping_div(b),
                "%" => a.wrapping_rem(b),
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

/// Evaluates a constant expression where every symbol comes from `lookup`
/// (used for `#if` and for cost formulas).
pub fn eval_const(expr: &Expr, lookup: &dyn Fn(&str) -> Option<i64>) -> Result<i64, EvalError> {
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
}
