//! Tokens of one line, shared by the preprocessor and the assembler.
//!
//! Comments are removed before lexing (see `preprocess::strip_comments`), so
//! the lexer only sees code. Every token keeps its byte range in the line so
//! diagnostics can point at it.

use std::ops::Range;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Tok {
    /// Names, directives (`.text`) and the location counter (`.`).
    Ident(String),
    Int(i64),
    /// A register written `$name`, stored lower-cased without the `$`.
    Reg(String),
    Str(String),
    /// Punctuation: `<<`, `>>`, `==`, `!=`, `<=`, `>=`, `&&`, `||`, `+=`
    /// or a single character.
    Punct(&'static str),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Token {
    pub tok: Tok,
    pub span: Range<usize>,
}

impl Token {
    pub(super) fn is(&self, punct: &str) -> bool {
        matches!(&self.tok, Tok::Punct(p) if *p == punct)
    }

    pub(super) fn ident(&self) -> Option<&str> {
        match &self.tok {
            Tok::Ident(name) => Some(name),
            _ => None,
        }
    }
}

/// A lexical error: message and byte range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct LexError {
    pub message: String,
    pub span: Range<usize>,
}

const PUNCT2: [&str; 9] = ["<<", ">>", "==", "!=", "<=", ">=", "&&", "||", "+="];
const PUNCT1: &str = "+-*/%&|^~!(),:;{}#@=<>?[]\\";

pub(super) fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == '.'
}

pub(super) fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '.'
}

/// Splits `text` into tokens.
pub(super) fn lex(text: &str) -> Result<Vec<Token>, LexError> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i] as char;
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if is_ident_start(c) {
            i += 1;
            while i < bytes.len() && is_ident_char(bytes[i] as char) {
                i += 1;
            }
            tokens.push(Token {
                tok: Tok::Ident(text[start..i].to_string()),
                span: start..i,
            });
            continue;
        }
        if c.is_ascii_digit() {
            while i < bytes.len() && (bytes[i] as char).is_ascii_alphanumeric() {
                i += 1;
            }
            let literal = &text[start..i];
            let value = parse_int(literal).ok_or_else(|| LexError {
                message: match parse_int_wide(literal) {
                    Some(_) => format!(
                        "`{literal}` does not fit in 64 bits (decimal integers are signed, at most 9223372036854775807; write a bit pattern in hex)"
                    ),
                    None => format!("invalid number `{literal}`"),
                },
                span: start..i,
            })?;
            tokens.push(Token {
                tok: Tok::Int(value),
                span: start..i,
            });
            continue;
        }
        if c == '$' {
            i += 1;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            // Register pairs and quads: `$a0:1`, `$a4:7`.
            if i + 1 < bytes.len() && bytes[i] == b':' && bytes[i + 1].is_ascii_digit() {
                i += 1;
                while i < bytes.len() && bytes[i].is_ascii_digit() {
                    i += 1;
                }
            }
            if i == start + 1 {
                return Err(LexError {
                    message: "expected a register name after `$`".into(),
                    span: start..i,
                });
            }
            tokens.push(Token {
                tok: Tok::Reg(text[start + 1..i].to_ascii_lowercase()),
                span: start..i,
            });
            continue;
        }
        if c == '"' {
            let (value, end) = lex_string(text, start)?;
            i = end;
            tokens.push(Token {
                tok: Tok::Str(value),
                span: start..i,
            });
            continue;
        }
        if c == '\'' {
            // A character constant: 'a' or '\n'.
            let rest = &text[start + 1..];
            let mut chars = rest.chars();
            let (value, used) = match chars.next() {
                Some('\\') => match chars.next() {
                    Some(e) => (escape(e).map(|c| c as i64), 2 + e.len_utf8()),
                    None => (None, 1),
                },
                Some(ch) => (Some(ch as i64), 1 + ch.len_utf8()),
                None => (None, 1),
            };
            let close = start + used;
            match value {
                Some(v) if text[close..].starts_with('\'') => {
                    i = close + 1;
                    tokens.push(Token {
                        tok: Tok::Int(v),
                        span: start..i,
                    });
                    continue;
                }
                _ => {
                    return Err(LexError {
                        message: "invalid character constant".into(),
                        span: start..(close.min(text.len())),
                    })
                }
            }
        }
        if let Some(p) = PUNCT2.iter().find(|p| text[i..].starts_with(**p)) {
            i += 2;
            tokens.push(Token {
                tok: Tok::Punct(p),
                span: start..i,
            });
            continue;
        }
        if let Some(index) = PUNCT1.find(c) {
            i += 1;
            tokens.push(Token {
                tok: Tok::Punct(&PUNCT1[index..index + 1]),
                span: start..i,
            });
            continue;
        }
        let width = text[i..].chars().next().map_or(1, char::len_utf8);
        return Err(LexError {
            message: format!("unexpected character `{}`", &text[i..i + width]),
            span: i..i + width,
        });
    }
    Ok(tokens)
}

fn escape(c: char) -> Option<char> {
    Some(match c {
        'n' => '\n',
        't' => '\t',
        'r' => '\r',
        '0' => '\0',
        '\\' => '\\',
        '"' => '"',
        '\'' => '\'',
        _ => return None,
    })
}

/// Lexes a string literal starting at `start` (the opening quote); returns
/// its value and the byte after the closing quote.
pub(super) fn lex_string(text: &str, start: usize) -> Result<(String, usize), LexError> {
    let mut value = String::new();
    let mut chars = text[start + 1..].char_indices();
    while let Some((offset, c)) = chars.next() {
        match c {
            '"' => return Ok((value, start + 1 + offset + 1)),
            '\\' => match chars.next().and_then(|(_, e)| escape(e)) {
                Some(e) => value.push(e),
                None => {
                    return Err(LexError {
                        message: "invalid escape in string".into(),
                        span: start + 1 + offset..start + 1 + offset + 2,
                    })
                }
            },
            _ => value.push(c),
        }
    }
    Err(LexError {
        message: "unterminated string".into(),
        span: start..text.len(),
    })
}

/// Parses `123`, `0x7f`, `0b101`, `0o17`, with an optional C suffix
/// (`u`, `l`, `ul`) so `#define` values written for C work too.
///
/// Arithmetic is on signed 64-bit integers: a decimal literal must fit one
/// (`18446744073709551615` would otherwise be -1, and `... + 1` zero); a
/// hex, binary or octal literal of up to 64 bits is a bit pattern, taken
/// as its two's complement (`0xffffffffffffffff` is -1).
pub(crate) fn parse_int(text: &str) -> Option<i64> {
    let (value, radix) = parse_int_wide(text)?;
    match radix {
        10 => i64::try_from(value).ok(),
        _ => Some(value as i64),
    }
}

/// The literal's value as an unsigned 64-bit integer, and its radix.
fn parse_int_wide(text: &str) -> Option<(u64, u32)> {
    let lower = text.to_ascii_lowercase();
    let (digits, radix) = if let Some(hex) = lower.strip_prefix("0x") {
        (hex, 16)
    } else if let Some(bin) = lower.strip_prefix("0b") {
        (bin, 2)
    } else if let Some(oct) = lower.strip_prefix("0o") {
        (oct, 8)
    } else {
        (lower.as_str(), 10)
    };
    let digits = digits.trim_end_matches(['u', 'l']);
    if digits.is_empty() {
        return None;
    }
    let value = u64::from_str_radix(digits, radix).ok()?;
    Some((value, radix))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<Tok> {
        lex(text)
            .expect("lexes")
            .into_iter()
            .map(|t| t.tok)
            .collect()
    }

    #[test]
    fn registers_numbers_and_punctuation() {
        assert_eq!(
            kinds("ld64 $A0:1, $m2+=, 0x10 << 2"),
            vec![
                Tok::Ident("ld64".into()),
                Tok::Reg("a0:1".into()),
                Tok::Punct(","),
                Tok::Reg("m2".into()),
                Tok::Punct("+="),
                Tok::Punct(","),
                Tok::Int(16),
                Tok::Punct("<<"),
                Tok::Int(2),
            ]
        );
        assert_eq!(
            kinds("'a' 0b11 7u"),
            vec![Tok::Int(97), Tok::Int(3), Tok::Int(7)]
        );
    }

    /// Decimal literals are signed 64-bit integers; hex, binary and octal
    /// ones are bit patterns. A decimal past i64 is an error at the
    /// literal, not a wrapped value.
    #[test]
    fn decimal_literals_past_64_bit_signed_are_errors() {
        assert_eq!(parse_int("9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_int("0xffffffffffffffff"), Some(-1));
        assert_eq!(parse_int("0x8000000000000000"), Some(i64::MIN));
        assert_eq!(parse_int("9223372036854775808"), None);
        assert_eq!(parse_int("18446744073709551615"), None);
        let e = lex(".word 18446744073709551615 + 1").unwrap_err();
        assert_eq!(e.span, 6..26);
        assert!(
            e.message.contains("does not fit in 64 bits"),
            "{}",
            e.message
        );
        let e = lex(".word 0x1ffffffffffffffff").unwrap_err();
        assert!(e.message.contains("invalid number"), "{}", e.message);
    }

    #[test]
    fn errors_have_spans() {
        let e = lex("x 12z").unwrap_err();
        assert_eq!(e.span, 2..5);
        let e = lex("\"abc").unwrap_err();
        assert_eq!(e.message, "unterminated string");
    }
}
