//! Statement syntax: splitting a line into statements and parsing
//! instructions and their operands. Directives are interpreted by the
//! assembler itself (`directives.rs`), which reads their arguments with
//! [`split_args`] and the expression parser.

use super::expr::{self, EvalError, Expr};
use super::lex::{Tok, Token};
use std::ops::Range;

/// A parsed instruction: `mnemonic op, op, ...`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct InstSyntax {
    pub mnemonic: String,
    pub span: Range<usize>,
    pub operands: Vec<OperandSyntax>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum OperandSyntax {
    /// `$m1`, `$a0:1`; a post-increment `$m1+=` keeps its `+=`.
    Reg {
        name: String,
        span: Range<usize>,
    },
    Expr(Expr),
}

impl OperandSyntax {
    pub(super) fn span(&self) -> Range<usize> {
        match self {
            OperandSyntax::Reg { span, .. } => span.clone(),
            OperandSyntax::Expr(e) => e.span(),
        }
    }
}

/// Splits a line's tokens into statements at `;` outside braces.
pub(super) fn split_statements(tokens: &[Token]) -> Vec<&[Token]> {
    let mut statements = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, token) in tokens.iter().enumerate() {
        match &token.tok {
            Tok::Punct("{") => depth += 1,
            Tok::Punct("}") => depth = depth.saturating_sub(1),
            Tok::Punct(";") if depth == 0 => {
                statements.push(&tokens[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    statements.push(&tokens[start..]);
    statements.retain(|s| !s.is_empty());
    statements
}

/// Splits arguments at commas outside parentheses.
pub(super) fn split_args(tokens: &[Token]) -> Vec<&[Token]> {
    if tokens.is_empty() {
        return Vec::new();
    }
    let mut args = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, token) in tokens.iter().enumerate() {
        match &token.tok {
            Tok::Punct("(") => depth += 1,
            Tok::Punct(")") => depth = depth.saturating_sub(1),
            Tok::Punct(",") if depth == 0 => {
                args.push(&tokens[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    args.push(&tokens[start..]);
    args
}

/// The byte just after a statement, for errors about something missing.
pub(super) fn end_of(tokens: &[Token], fallback: usize) -> usize {
    tokens.last().map_or(fallback, |t| t.span.end)
}

/// Parses `mnemonic operands...` (the tokens of one instruction).
pub(super) fn parse_inst(tokens: &[Token], eol: usize) -> Result<InstSyntax, EvalError> {
    let Some(first) = tokens.first() else {
        return Err(EvalError::bad("expected an instruction", eol..eol + 1));
    };
    let Some(mnemonic) = first.ident() else {
        return Err(EvalError::bad(
            "expected an instruction",
            first.span.clone(),
        ));
    };
    let mut operands = Vec::new();
    let end = end_of(tokens, eol);
    for arg in split_args(&tokens[1..]) {
        operands.push(parse_operand(arg, end)?);
    }
    Ok(InstSyntax {
        mnemonic: mnemonic.to_ascii_lowercase(),
        span: first.span.clone(),
        operands,
    })
}

fn parse_operand(tokens: &[Token], eol: usize) -> Result<OperandSyntax, EvalError> {
    match tokens {
        [] => Err(EvalError::bad("expected an operand", eol..eol + 1)),
        [Token {
            tok: Tok::Reg(name),
            span,
        }] => Ok(OperandSyntax::Reg {
            name: name.clone(),
            span: span.clone(),
        }),
        [Token {
            tok: Tok::Reg(name),
            span,
        }, inc]
            if inc.is("+=") =>
        {
            Ok(OperandSyntax::Reg {
                name: format!("{name}+="),
                span: span.start..inc.span.end,
            })
        }
        _ => Ok(OperandSyntax::Expr(expr::parse_all(tokens, eol)?)),
    }
}

/// Parses a bundle `{ main ; aux }` (the tokens including the braces).
pub(super) fn parse_bundle(tokens: &[Token]) -> Result<(InstSyntax, InstSyntax), EvalError> {
    let open = &tokens[0];
    let Some(close) = tokens.iter().rposition(|t| t.is("}")) else {
        return Err(EvalError::bad(
            "expected `}` to close the bundle",
            open.span.clone(),
        ));
    };
    if let Some(extra) = tokens.get(close + 1) {
        return Err(EvalError::bad(
            "unexpected token after the bundle",
            extra.span.clone(),
        ));
    }
    let inner = &tokens[1..close];
    let parts: Vec<&[Token]> = inner.split(|t| t.is(";")).collect();
    if parts.len() != 2 {
        return Err(EvalError::bad(
            "a bundle holds exactly two instructions: `{ main ; aux }`",
            open.span.start..tokens[close].span.end,
        ));
    }
    let main = parse_inst(parts[0], tokens[close].span.start)?;
    let aux = parse_inst(parts[1], tokens[close].span.start)?;
    Ok((main, aux))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::asm::lex::lex;

    #[test]
    fn statements_split_outside_bundles() {
        let tokens = lex("a: nop; { x ; y } ; b").unwrap();
        let statements = split_statements(&tokens);
        assert_eq!(statements.len(), 3);
        assert_eq!(statements[1].len(), 5);
    }

    #[test]
    fn operands_are_registers_or_expressions() {
        let text = "ld32step $a0, $m1+=, (n + 1) * 4";
        let inst = parse_inst(&lex(text).unwrap(), text.len()).unwrap();
        assert_eq!(inst.mnemonic, "ld32step");
        assert_eq!(inst.operands.len(), 3);
        assert!(matches!(&inst.operands[1], OperandSyntax::Reg { name, .. } if name == "m1+="));
        assert_eq!(inst.operands[2].span(), 21..32);
    }
}
