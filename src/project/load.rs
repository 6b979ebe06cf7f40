//! Reading a project's files: the root, then its includes, depth first.
//!
//! Include paths are relative to the including file. A file reached twice
//! (a diamond) is read once; a file that includes itself, directly or
//! through others, is an error at the `include` entry that closes the cycle.

use super::limits;
use super::syntax::FileAst;
use crate::diagnostic::Diagnostic;
use crate::vfs::{FileText, ReadError};
use camino::{Utf8Path, Utf8PathBuf};
use std::sync::Arc;
use toml::Spanned;

/// One parsed file.
pub(crate) struct LoadedFile {
    pub path: Utf8PathBuf,
    pub text: Arc<str>,
    pub ast: FileAst,
    /// Whether this is the root project file.
    pub is_root: bool,
}

/// The files of a project in load order (includes before their includer),
/// and the problems met while reading them.
pub(crate) struct Loaded {
    pub files: Vec<LoadedFile>,
    pub diagnostics: Vec<Diagnostic>,
}

pub(super) type ReadFile<'a> = dyn Fn(&Utf8Path) -> FileText + 'a;

pub(crate) fn load(root: &Utf8Path, read: &ReadFile<'_>) -> Loaded {
    let mut loaded = Loaded {
        files: Vec::new(),
        diagnostics: Vec::new(),
    };
    let text = match read(root) {
        Ok(text) => text,
        Err(problem) => {
            loaded.diagnostics.push(Diagnostic::error(format!(
                "cannot read project file `{root}`: {problem}"
            )));
            return loaded;
        }
    };
    let mut stack = vec![root.to_owned()];
    load_file(root, text, true, &mut stack, read, &mut loaded);
    loaded
}

fn load_file(
    path: &Utf8Path,
    text: Arc<str>,
    is_root: bool,
    stack: &mut Vec<Utf8PathBuf>,
    read: &ReadFile<'_>,
    loaded: &mut Loaded,
) {
    let ast = match toml::from_str::<FileAst>(&text) {
        Ok(ast) => ast,
        Err(error) => {
            let span = error.span().unwrap_or(0..0);
            let message = error.message().trim_end().to_string();
            let mut diagnostic = Diagnostic::error(&message).at(path, span);
            if let Some(help) = unknown_key_suggestion(&message) {
                diagnostic = diagnostic.help(help);
            }
            loaded.diagnostics.push(diagnostic);
            return;
        }
    };
    for include in &ast.include {
        let target = resolve(path, include.get_ref());
        if stack.contains(&target) {
            let chain: Vec<String> = stack
                .iter()
                .skip_while(|p| **p != target)
                .map(|p| p.to_string())
                .chain([target.to_string()])
                .collect();
            loaded.diagnostics.push(
                Diagnostic::error(format!("include cycle through `{}`", include.get_ref()))
                    .at(path, include.span())
                    .label("this include closes the cycle")
                    .note(format!("cycle: {}", chain.join(" -> "))),
            );
            continue;
        }
        if loaded.files.iter().any(|f| f.path == target) {
            continue;
        }
        if stack.len() >= limits::MAX_INCLUDE_DEPTH
            || loaded.files.len() + stack.len() >= limits::MAX_FILES
        {
            loaded.diagnostics.push(
                Diagnostic::error(format!(
                    "includes nested deeper than {} files or more than {} files in all",
                    limits::MAX_INCLUDE_DEPTH,
                    limits::MAX_FILES
                ))
                .at(path, include.span()),
            );
            continue;
        }
        let included_text = match read(&target) {
            Ok(text) => text,
            Err(ReadError::Missing) => {
                loaded.diagnostics.push(
                    Diagnostic::error(format!("included file `{}` not found", include.get_ref()))
                        .at(path, include.span())
                        .label(format!("looked for `{target}`")),
                );
                continue;
            }
            Err(problem) => {
                loaded.diagnostics.push(
                    Diagnostic::error(format!(
                        "cannot read included file `{}`: {problem}",
                        include.get_ref()
                    ))
                    .at(path, include.span())
                    .label(format!("read as `{target}`")),
                );
                continue;
            }
        };
        stack.push(target.clone());
        load_file(&target, included_text, false, stack, read, loaded);
        stack.pop();
    }
    loaded.files.push(LoadedFile {
        path: path.to_owned(),
        text,
        ast,
        is_root,
    });
}

/// "Did you mean" for serde's unknown-key message, which names the key and
/// the expected ones: ``unknown field `shap`, expected one of `name`,
/// `shape` `` (or ``expected `a` or `b` ``).
fn unknown_key_suggestion(message: &str) -> Option<String> {
    let rest = message.strip_prefix("unknown field `")?;
    let (key, expected) = rest.split_once('`')?;
    let known: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    crate::suggest::did_you_mean(key, known)
}

/// `include` relative to the directory of `from`, with `.` and `..`
/// resolved lexically so the same file always has the same path.
pub(crate) fn resolve(from: &Utf8Path, include: &str) -> Utf8PathBuf {
    let joined = match from.parent() {
        Some(dir) => dir.join(include),
        None => Utf8PathBuf::from(include),
    };
    crate::vfs::normalize(&joined)
}

/// The span of the key whose value is at `value`: the text before a
/// `key = value` pair. Falls back to the value's span.
pub(super) fn key_span<T>(text: &str, value: &Spanned<T>) -> std::ops::Range<usize> {
    let span = value.span();
    let before = &text[..span.start.min(text.len())];
    let trimmed = before.trim_end();
    let Some(eq) = trimmed.strip_suffix('=') else {
        return span;
    };
    let key_text = eq.trim_end();
    let end = key_text.len();
    let start = key_text
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '"'))
        .map_or(0, |i| i + 1);
    if start < end {
        start..end
    } else {
        span
    }
}

/// An error when the project's files declare more names or repeats than
/// the limits, before anything is validated.
pub(super) fn too_many_names(loaded: &Loaded) -> Option<Diagnostic> {
    let mut names = 0usize;
    let mut repeats = 0usize;
    for file in &loaded.files {
        let ast = &file.ast;
        names += ast.tensor.len() + ast.op.len() + ast.repeat.len();
        repeats += ast.repeat.len();
        for repeat in &ast.repeat {
            let r = repeat.get_ref();
            names += 1 + r.tensor.len() + r.op.len();
        }
    }
    let root = loaded.files.iter().find(|f| f.is_root)?;
    let problem = if names > limits::MAX_NAMES {
        format!(
            "the project declares {names} names (tensors, operations, repeats), more than {}",
            limits::MAX_NAMES
        )
    } else if repeats > limits::MAX_REPEATS {
        format!(
            "the project declares {repeats} repeats, more than {}",
            limits::MAX_REPEATS
        )
    } else {
        return None;
    };
    Some(Diagnostic::error(problem).at(&root.path, 0..0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn includes_resolve_relative_to_the_including_file() {
        assert_eq!(
            resolve(Utf8Path::new("projects/vit.toml"), "layers/block.toml"),
            "projects/layers/block.toml"
        );
        assert_eq!(
            resolve(Utf8Path::new("projects/a/x.toml"), "../b/./y.toml"),
            "projects/b/y.toml"
        );
        assert_eq!(resolve(Utf8Path::new("x.toml"), "../y.toml"), "../y.toml");
    }

    #[test]
    fn unknown_keys_get_the_closest_expected_key() {
        let suggest = |m: &str| unknown_key_suggestion(m);
        assert_eq!(
            suggest("unknown field `shap`, expected one of `name`, `shape`, `dtype`").as_deref(),
            Some("did you mean `shape`?")
        );
        assert_eq!(
            suggest("unknown field `std2`, expected `std` or `scale`").as_deref(),
            Some("did you mean `std`?")
        );
        assert_eq!(suggest("unknown field `zzzzzz`, expected `std`"), None);
        assert_eq!(suggest("invalid type: string"), None);
    }
}
