//! A minimal line assembler for unit tests and benchmarks of the executor,
//! which cannot depend on the kernel assembler (`crate::asm`): one
//! instruction, `{ main ; aux }` bundle, `label:` or `.word N` per line,
//! `#` comments, operands `$reg`, integers or label names. Bundles must
//! already sit at 8-byte aligned addresses; it does not pad.

use super::{assemble, check_bundle, Operand, Value};

/// Assembles `text` for address `base`; errors name the line.
pub fn assemble_program(text: &str, base: u32) -> Result<Vec<u32>, String> {
    let lines: Vec<&str> = text
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .collect();
    // Pass one: label addresses.
    let mut labels = std::collections::HashMap::new();
    let mut at = base;
    for line in &lines {
        if let Some(label) = line.strip_suffix(':') {
            labels.insert(label.to_string(), at);
        } else {
            at += if line.starts_with('{') { 8 } else { 4 };
        }
    }
    let mut words = Vec::new();
    for line in &lines {
        if line.ends_with(':') {
            continue;
        }
        let here = base + 4 * words.len() as u32;
        let fail = |e: String| format!("{line}: {e}");
        if let Some(inner) = line.strip_prefix('{').and_then(|l| l.strip_suffix('}')) {
            let (main, aux) = inner
                .split_once(';')
                .ok_or_else(|| fail("expected `;`".into()))?;
            if !here.is_multiple_of(8) {
                return Err(fail(format!("bundle at unaligned address {here:#x}")));
            }
            let main = one(main.trim(), &labels).map_err(fail)?;
            let aux = one(aux.trim(), &labels).map_err(fail)?;
            check_bundle(main, aux).map_err(|e| fail(e.message))?;
            words.extend([main, aux]);
        } else if let Some(value) = line.strip_prefix(".word") {
            words.push(number(value.trim()).ok_or_else(|| fail("bad number".into()))? as u32);
        } else {
            words.push(one(line, &labels).map_err(fail)?);
        }
    }
    Ok(words)
}

fn number(text: &str) -> Option<i64> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let v = match digits.strip_prefix("0x") {
        Some(hex) => i64::from_str_radix(hex, 16).ok()?,
        None => digits.parse().ok()?,
    };
    Some(if negative { -v } else { v })
}

fn one(text: &str, labels: &std::collections::HashMap<String, u32>) -> Result<u32, String> {
    let (mnemonic, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    let mut operands = Vec::new();
    for operand in rest.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let operand = if let Some(reg) = operand.strip_prefix('$') {
            Operand::Register(reg.to_ascii_lowercase())
        } else if let Some(v) = number(operand) {
            Operand::Value(Value::Const(v))
        } else if let Some(&addr) = labels.get(operand) {
            Operand::Value(Value::Const(i64::from(addr)))
        } else {
            return Err(format!("unknown label `{operand}`"));
        };
        operands.push(operand);
    }
    assemble(mnemonic, &operands)
        .map(|e| e.word)
        .map_err(|e| e.message)
}
