//! Completion in project files: table headers, the keys of the table the
//! cursor is in, the values of keys with a fixed set (op kinds, dtypes,
//! roles, ...), and tensor names where a key reads tensors.
//!
//! The text being typed rarely parses (`inputs = ["` is not TOML yet), so
//! completion reads the text line by line instead of through the parser:
//! the table a line is in is the last header above it, and the names on
//! offer are the `name = "..."` and `carry = "..."` values of the
//! project's files, with a repeat body's names offered only inside that
//! repeat.

use super::position::LineIndex;
use super::session::Session;
use crate::project::schema::{self, Key, ValueKind};
use camino::Utf8Path;
use lsp_types::{
    CompletionItem, CompletionItemKind, CompletionResponse, Documentation, Position, Uri,
};

/// Keys whose values name tensors.
const NAME_KEYS: &[&str] = &["inputs", "input", "result", "outputs"];

pub(super) fn completion(
    session: &Session,
    uri: &Uri,
    position: Position,
) -> Option<CompletionResponse> {
    let (path, text) = session.document(uri)?;
    if path.extension() != Some("toml") {
        return None;
    }
    let offset = LineIndex::new(&text).offset(position);
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let before = &text[line_start..offset];
    let header = header_above(&text[..line_start]);
    let items = if before.trim_start().starts_with('[') && !before.contains('=') {
        headers()
    } else if let Some((key, value)) = key_and_value(before) {
        let in_string = value.matches('"').count() % 2 == 1;
        if NAME_KEYS.contains(&key) {
            names(session, &path, &text, offset, in_string)
        } else {
            values(header.as_deref(), key, in_string)
        }
    } else {
        keys(header.as_deref())
    };
    Some(CompletionResponse::Array(items))
}

/// The header of the table `text` ends in (`tensor`, `repeat.op`).
fn header_above(text: &str) -> Option<String> {
    text.lines().rev().find_map(|line| {
        let line = line.trim();
        let inner = line
            .strip_prefix("[[")
            .and_then(|l| l.strip_suffix("]]"))
            .or_else(|| line.strip_prefix('[').and_then(|l| l.strip_suffix(']')))?;
        Some(inner.trim().to_string())
    })
}

/// The key being given a value on this line (the last `key =` before the
/// cursor, so inline tables work) and the value typed so far.
fn key_and_value(before: &str) -> Option<(&str, &str)> {
    let eq = before.rfind('=')?;
    let key_text = before[..eq].trim_end();
    let start = key_text
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .map_or(0, |i| i + 1);
    let key = &key_text[start..];
    (!key.is_empty()).then(|| (key, &before[eq + 1..]))
}

fn headers() -> Vec<CompletionItem> {
    schema::TABLES
        .iter()
        .map(|table| {
            let written = table.written();
            CompletionItem {
                label: written.clone(),
                kind: Some(CompletionItemKind::MODULE),
                detail: Some(table.doc.to_string()),
                // The typed `[` is part of the word the client replaces.
                insert_text: Some(written),
                ..CompletionItem::default()
            }
        })
        .collect()
}

fn keys(header: Option<&str>) -> Vec<CompletionItem> {
    let keys: &[Key] = match header {
        None => schema::ROOT_KEYS,
        Some(header) => match schema::table(header) {
            Some(table) => table.keys,
            None => return Vec::new(),
        },
    };
    keys.iter()
        .map(|key| CompletionItem {
            label: key.name.to_string(),
            kind: Some(CompletionItemKind::FIELD),
            detail: Some(format!(
                "{}{}",
                kind_name(key.kind),
                if key.required { ", required" } else { "" }
            )),
            documentation: Some(Documentation::String(key.doc.to_string())),
            insert_text: Some(format!("{} = ", key.name)),
            ..CompletionItem::default()
        })
        .collect()
}

fn kind_name(kind: ValueKind) -> &'static str {
    match kind {
        ValueKind::String => "string",
        ValueKind::Integer => "integer",
        ValueKind::Number => "number",
        ValueKind::Boolean => "boolean",
        ValueKind::Strings => "array of strings",
        ValueKind::Integers => "array of integers",
        ValueKind::Init => "inline table",
    }
}

/// The allowed values of `key` in the table `header` (or in `init`).
fn values(header: Option<&str>, key: &str, in_string: bool) -> Vec<CompletionItem> {
    let in_table = header
        .and_then(schema::table)
        .and_then(|t| t.keys.iter().find(|k| k.name == key));
    let found = in_table.or_else(|| schema::INIT_KEYS.iter().find(|k| k.name == key));
    let Some(found) = found else {
        return Vec::new();
    };
    if found.kind == ValueKind::Boolean {
        return ["true", "false"]
            .iter()
            .map(|v| value_item(v, v.to_string()))
            .collect();
    }
    found
        .values
        .iter()
        .map(|v| {
            let insert = if in_string {
                v.to_string()
            } else {
                format!("\"{v}\"")
            };
            value_item(v, insert)
        })
        .collect()
}

fn value_item(label: &str, insert: String) -> CompletionItem {
    CompletionItem {
        label: label.to_string(),
        kind: Some(CompletionItemKind::ENUM_MEMBER),
        insert_text: Some(insert),
        ..CompletionItem::default()
    }
}

/// A name defined in a file's text, and the repeat (by order in its file)
/// whose body it is local to.
struct TextName {
    name: String,
    kind: &'static str,
    repeat: Option<usize>,
}

/// The names `text` defines, read line by line.
fn text_names(text: &str) -> Vec<TextName> {
    let mut names = Vec::new();
    let mut header = String::new();
    let mut repeats = 0usize;
    for line in text.lines() {
        if let Some(h) = header_above(line) {
            if h == "repeat" {
                repeats += 1;
            }
            header = h;
            continue;
        }
        let Some((key, value)) = key_and_value(line) else {
            continue;
        };
        let value = value.trim();
        let Some(name) = value.strip_prefix('"').and_then(|v| v.split('"').next()) else {
            continue;
        };
        let (kind, local) = match (header.as_str(), key) {
            ("tensor", "name") => ("tensor", false),
            ("op", "name") => ("op", false),
            ("repeat", "name") => ("repeat", false),
            ("repeat", "carry") => ("repeat carry", true),
            ("repeat.tensor", "name") => ("repeat weight", true),
            ("repeat.op", "name") => ("repeat op", true),
            _ => continue,
        };
        names.push(TextName {
            name: name.to_string(),
            kind,
            repeat: local.then_some(repeats),
        });
    }
    names
}

/// Tensor names visible at `offset` of `path`, from every file of its
/// project.
fn names(
    session: &Session,
    path: &Utf8Path,
    text: &str,
    offset: usize,
    in_string: bool,
) -> Vec<CompletionItem> {
    let before = &text[..offset];
    let here_repeat = match header_above(before).as_deref() {
        Some(h) if h.starts_with("repeat") => Some(
            before
                .lines()
                .filter(|l| header_above(l).as_deref() == Some("repeat"))
                .count(),
        ),
        _ => None,
    };
    let mut files: Vec<camino::Utf8PathBuf> = match session.root_of(path) {
        Some(root) => session.project_files(&root).into_iter().collect(),
        None => Vec::new(),
    };
    if !files.iter().any(|f| f == path) {
        files.push(path.to_owned());
    }
    let mut items: Vec<CompletionItem> = Vec::new();
    for file in files {
        let Some(file_text) = session.text(&file) else {
            continue;
        };
        for found in text_names(&file_text) {
            let visible = match found.repeat {
                None => true,
                Some(repeat) => file == path && Some(repeat) == here_repeat,
            };
            if !visible || items.iter().any(|i| i.label == found.name) {
                continue;
            }
            items.push(CompletionItem {
                label: found.name.clone(),
                kind: Some(CompletionItemKind::VARIABLE),
                detail: Some(format!(
                    "{} in {}",
                    found.kind,
                    file.file_name().unwrap_or("")
                )),
                insert_text: Some(if in_string {
                    found.name.clone()
                } else {
                    format!("\"{}\"", found.name)
                }),
                ..CompletionItem::default()
            });
        }
    }
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_give_their_table_key_and_names() {
        let text = "[[tensor]]\nname = \"x\"\n[[repeat]]\nname = \"r\"\ncarry = \"h\"\n[[repeat.op]]\nname = \"h2\"\ninputs = [\"";
        assert_eq!(header_above(text).as_deref(), Some("repeat.op"));
        assert_eq!(
            key_and_value("inputs = [\"h\", \""),
            Some(("inputs", " [\"h\", \""))
        );
        assert_eq!(key_and_value("init = { dist = \"n"), Some(("dist", " \"n")));
        assert_eq!(key_and_value("na"), None);
        let names: Vec<(String, Option<usize>)> = text_names(text)
            .into_iter()
            .map(|n| (n.name, n.repeat))
            .collect();
        assert_eq!(
            names,
            [
                ("x".to_string(), None),
                ("r".to_string(), None),
                ("h".to_string(), Some(1)),
                ("h2".to_string(), Some(1))
            ]
        );
        let values: Vec<String> = values(Some("op"), "dtype", true)
            .into_iter()
            .map(|i| i.label)
            .collect();
        assert_eq!(values, ["f32", "f16", "f143", "f152"]);
        let op_keys = keys(Some("repeat.op"));
        assert_eq!(op_keys[0].insert_text.as_deref(), Some("name = "));
    }
}
