//! Where things are written in a project's files: every name's definition
//! and every reference to it, every include and every op kind, with file
//! and byte span.
//!
//! The validated [`Graph`](crate::graph::Graph) deliberately holds no
//! positions (so an edit that only moves text recomputes nothing); the
//! index is the positional view for the tools that need one: located
//! warnings ([`super::lints`]) and the language server (hover, go to
//! definition, completion, document symbols). It is built from parsed
//! files alone, so it also covers a project that does not validate.

use super::load::{Loaded, LoadedFile};
use super::syntax::{OpAst, TensorAst};
use camino::{Utf8Path, Utf8PathBuf};
use std::ops::Range;
use toml::Spanned;

/// What a name names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum DefinitionKind {
    /// A `[[tensor]]`: an input or a weight.
    Tensor,
    /// An `[[op]]`, whose name is also its output tensor's.
    Op,
    /// A `[[repeat]]`, whose name is the tensor of its last iteration.
    Repeat,
    /// A repeat's `carry`: the activation entering each iteration.
    Carry,
    /// A `[[repeat.tensor]]`: a per-iteration weight.
    BodyTensor,
    /// A `[[repeat.op]]`.
    BodyOp,
}

impl DefinitionKind {
    pub(crate) fn describe(self) -> &'static str {
        match self {
            DefinitionKind::Tensor => "tensor",
            DefinitionKind::Op => "op",
            DefinitionKind::Repeat => "repeat",
            DefinitionKind::Carry => "repeat carry",
            DefinitionKind::BodyTensor => "repeat weight",
            DefinitionKind::BodyOp => "repeat op",
        }
    }
}

/// A name's definition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Definition {
    pub name: String,
    pub kind: DefinitionKind,
    pub file: Utf8PathBuf,
    /// The name's string value (quotes included).
    pub name_span: Range<usize>,
    /// The whole table, from its header to its last value (for a carry,
    /// the `carry` value).
    pub item_span: Range<usize>,
    /// The repeat whose body the definition is in.
    pub repeat: Option<String>,
}

/// Where a name is read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ReferenceSite {
    /// An entry of an op's `inputs`.
    OpInput { op: String },
    /// A repeat's `input`.
    RepeatInput { repeat: String },
    /// A repeat's `result` (a body op).
    RepeatResult { repeat: String },
    /// An entry of `[check] outputs`.
    CheckOutput,
}

/// One use of a name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Reference {
    pub name: String,
    pub file: Utf8PathBuf,
    pub span: Range<usize>,
    pub site: ReferenceSite,
    /// The repeat whose body the reference is in: its names come first.
    pub scope: Option<String>,
}

/// One `include` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Include {
    /// The including file.
    pub file: Utf8PathBuf,
    pub span: Range<usize>,
    /// The path as written.
    pub text: String,
    /// The included file, resolved.
    pub target: Utf8PathBuf,
}

/// An op's `op = "kind"` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct OpKindSite {
    pub op: String,
    pub kind: String,
    pub file: Utf8PathBuf,
    pub span: Range<usize>,
}

/// Everything with a position in a project's files.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ProjectIndex {
    /// The files parsed, includes before their includer.
    pub files: Vec<Utf8PathBuf>,
    pub definitions: Vec<Definition>,
    pub references: Vec<Reference>,
    pub includes: Vec<Include>,
    pub op_kinds: Vec<OpKindSite>,
    /// Body names more than one repeat uses ([`super::scope`]).
    pub shared: std::collections::HashSet<String>,
}

/// What is at a position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IndexItem<'a> {
    Definition(&'a Definition),
    Reference(&'a Reference),
    Include(&'a Include),
    OpKind(&'a OpKindSite),
}

impl ProjectIndex {
    pub(super) fn of(loaded: &Loaded) -> ProjectIndex {
        let mut index = ProjectIndex {
            shared: super::scope::shared_body_names(&loaded.files),
            ..ProjectIndex::default()
        };
        for file in &loaded.files {
            index.files.push(file.path.clone());
            index.add_file(file);
        }
        index
    }

    fn add_file(&mut self, file: &LoadedFile) {
        let path = &file.path;
        for include in &file.ast.include {
            self.includes.push(Include {
                file: path.clone(),
                span: include.span(),
                text: include.get_ref().clone(),
                target: super::load::resolve(path, include.get_ref()),
            });
        }
        for tensor in &file.ast.tensor {
            self.tensor(path, tensor, DefinitionKind::Tensor, None);
        }
        for op in &file.ast.op {
            self.op(path, op, DefinitionKind::Op, None);
        }
        for repeat in &file.ast.repeat {
            let ast = repeat.get_ref();
            let name = ast.name.get_ref().clone();
            let values = [&ast.name, &ast.input, &ast.carry, &ast.result];
            let end = values
                .iter()
                .map(|v| v.span().end)
                .fold(ast.count.span().end, usize::max);
            let item = repeat.span().start..end;
            self.define(path, &ast.name, DefinitionKind::Repeat, item, None);
            let owner = Some(name.clone());
            self.define(
                path,
                &ast.carry,
                DefinitionKind::Carry,
                ast.carry.span(),
                owner.clone(),
            );
            self.refer(
                path,
                &ast.input,
                ReferenceSite::RepeatInput {
                    repeat: name.clone(),
                },
                None,
            );
            self.refer(
                path,
                &ast.result,
                ReferenceSite::RepeatResult {
                    repeat: name.clone(),
                },
                owner.clone(),
            );
            for tensor in &ast.tensor {
                self.tensor(path, tensor, DefinitionKind::BodyTensor, owner.clone());
            }
            for op in &ast.op {
                self.op(path, op, DefinitionKind::BodyOp, owner.clone());
            }
        }
        if let Some(check) = &file.ast.check {
            for output in check.get_ref().outputs.get_ref() {
                self.refer(path, output, ReferenceSite::CheckOutput, None);
            }
        }
    }

    fn tensor(
        &mut self,
        path: &Utf8Path,
        tensor: &Spanned<TensorAst>,
        kind: DefinitionKind,
        repeat: Option<String>,
    ) {
        let ast = tensor.get_ref();
        let end = [
            Some(ast.name.span()),
            Some(ast.shape.span()),
            Some(ast.dtype.span()),
            Some(ast.role.span()),
            ast.scale.as_ref().map(Spanned::span),
            ast.init.as_ref().map(Spanned::span),
        ]
        .into_iter()
        .flatten()
        .fold(tensor.span().end, |end, span| end.max(span.end));
        let item = tensor.span().start..end;
        self.define(path, &ast.name, kind, item, repeat);
    }

    fn op(
        &mut self,
        path: &Utf8Path,
        op: &Spanned<OpAst>,
        kind: DefinitionKind,
        repeat: Option<String>,
    ) {
        let ast = op.get_ref();
        let name = ast.name.get_ref().clone();
        let end = [
            Some(ast.name.span()),
            Some(ast.op.span()),
            Some(ast.inputs.span()),
            ast.dtype.as_ref().map(Spanned::span),
            ast.scale.as_ref().map(Spanned::span),
            ast.transpose_rhs.as_ref().map(Spanned::span),
            ast.causal.as_ref().map(Spanned::span),
            ast.epsilon.as_ref().map(Spanned::span),
            ast.perm.as_ref().map(Spanned::span),
            ast.shape.as_ref().map(Spanned::span),
            ast.block.as_ref().map(Spanned::span),
            ast.axis.as_ref().map(Spanned::span),
            ast.start.as_ref().map(Spanned::span),
            ast.end.as_ref().map(Spanned::span),
        ]
        .into_iter()
        .flatten()
        .fold(op.span().end, |end, span| end.max(span.end));
        self.define(path, &ast.name, kind, op.span().start..end, repeat.clone());
        self.op_kinds.push(OpKindSite {
            op: name.clone(),
            kind: ast.op.get_ref().clone(),
            file: path.to_owned(),
            span: ast.op.span(),
        });
        for input in ast.inputs.get_ref() {
            self.refer(
                path,
                input,
                ReferenceSite::OpInput { op: name.clone() },
                repeat.clone(),
            );
        }
    }

    fn define(
        &mut self,
        path: &Utf8Path,
        name: &Spanned<String>,
        kind: DefinitionKind,
        item_span: Range<usize>,
        repeat: Option<String>,
    ) {
        self.definitions.push(Definition {
            name: name.get_ref().clone(),
            kind,
            file: path.to_owned(),
            name_span: name.span(),
            item_span,
            repeat,
        });
    }

    fn refer(
        &mut self,
        path: &Utf8Path,
        name: &Spanned<String>,
        site: ReferenceSite,
        scope: Option<String>,
    ) {
        self.references.push(Reference {
            name: name.get_ref().clone(),
            file: path.to_owned(),
            span: name.span(),
            site,
            scope,
        });
    }

    /// The definition of `name` as seen from the body of repeat `scope`
    /// (or from outside any body): the body's own first, then an outer one,
    /// then any.
    pub(crate) fn definition_in(&self, name: &str, scope: Option<&str>) -> Option<&Definition> {
        let named = || self.definitions.iter().filter(move |d| d.name == name);
        (named().find(|d| scope.is_some() && d.repeat.as_deref() == scope))
            .or_else(|| named().find(|d| d.repeat.is_none()))
            .or_else(|| named().next())
    }

    /// The definition a reference reads.
    pub(crate) fn resolve(&self, reference: &Reference) -> Option<&Definition> {
        self.definition_in(&reference.name, reference.scope.as_deref())
    }

    /// The graph's name for what `definition` defines (`enc.h` for a body
    /// name other repeats use too).
    pub(crate) fn graph_name(&self, definition: &Definition) -> String {
        super::scope::graph_name(definition.repeat.as_deref(), &definition.name, &self.shared)
    }

    #[cfg(test)]
    /// The names visible at `offset` of `file`: everything outside repeat
    /// bodies, plus the locals of the repeat body the offset is in.
    pub(super) fn visible_names(&self, file: &Utf8Path, offset: usize) -> Vec<&Definition> {
        let scope = self
            .definitions
            .iter()
            .filter(|d| d.kind == DefinitionKind::Repeat && d.file == file)
            .find(|d| self.repeat_region(d).contains(&offset))
            .map(|d| d.name.as_str());
        self.definitions
            .iter()
            .filter(|d| d.repeat.is_none() || d.repeat.as_deref() == scope)
            .collect()
    }

    #[cfg(test)]
    /// The text a repeat spans: its own table and its body's tables, which
    /// follow it as `[[repeat.tensor]]` and `[[repeat.op]]` (the end is
    /// inclusive, for a cursor at the very end).
    fn repeat_region(&self, repeat: &Definition) -> std::ops::RangeInclusive<usize> {
        let end = self
            .definitions
            .iter()
            .filter(|d| d.repeat.as_deref() == Some(&repeat.name) && d.file == repeat.file)
            .map(|d| d.item_span.end)
            .fold(repeat.item_span.end, usize::max);
        repeat.item_span.start..=end
    }

    /// The name, include or op kind under `offset` in `file` (a position
    /// right after a value still counts, as editors place the cursor there).
    pub(crate) fn at(&self, file: &Utf8Path, offset: usize) -> Option<IndexItem<'_>> {
        let inside = |f: &Utf8Path, span: &Range<usize>| {
            f == file && span.start <= offset && offset <= span.end
        };
        self.definitions
            .iter()
            .find(|d| inside(&d.file, &d.name_span))
            .map(IndexItem::Definition)
            .or_else(|| {
                self.references
                    .iter()
                    .find(|r| inside(&r.file, &r.span))
                    .map(IndexItem::Reference)
            })
            .or_else(|| {
                self.includes
                    .iter()
                    .find(|i| inside(&i.file, &i.span))
                    .map(IndexItem::Include)
            })
            .or_else(|| {
                self.op_kinds
                    .iter()
                    .find(|k| inside(&k.file, &k.span))
                    .map(IndexItem::OpKind)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    const ROOT: &str = r#"include = ["layer.toml"]

[project]
name = "p"
target = "ipu21"
tiles = 4

[[tensor]]
name = "x"
shape = [8, 16]
dtype = "f16"
role = "input"

[check]
reference_precision = "f32"
min_cosine_similarity = 0.99
max_abs_error = 0.1
outputs = ["stack"]
"#;

    const LAYER: &str = r#"[[repeat]]
name = "stack"
count = 2
input = "x"
carry = "h"
result = "h_next"

[[repeat.op]]
name = "h_next"
op = "gelu"
inputs = ["h"]
dtype = "f16"
"#;

    fn index() -> ProjectIndex {
        let read = |path: &Utf8Path| -> crate::vfs::FileText {
            match path.as_str() {
                "root.toml" => Ok(Arc::from(ROOT)),
                "layer.toml" => Ok(Arc::from(LAYER)),
                _ => Err(crate::fsutil::ReadError::Missing),
            }
        };
        ProjectIndex::of(&super::super::load::load(Utf8Path::new("root.toml"), &read))
    }

    fn check(file: &str, text: &str, needle: &str, expected: expect_test::Expect) {
        let index = index();
        let offset = text.find(needle).expect("needle") + 1;
        let found = match index.at(Utf8Path::new(file), offset) {
            Some(IndexItem::Definition(d)) => format!(
                "definition {} ({}) in {:?}",
                d.name,
                d.kind.describe(),
                d.repeat
            ),
            Some(IndexItem::Reference(r)) => {
                let definition = index.resolve(r).expect("defined");
                format!(
                    "reference {} {:?} -> {}@{:?}",
                    r.name, r.site, definition.file, definition.name_span
                )
            }
            Some(IndexItem::Include(i)) => format!("include {}", i.target),
            Some(IndexItem::OpKind(k)) => format!("op kind {} of {}", k.kind, k.op),
            None => "nothing".to_string(),
        };
        expected.assert_eq(&found);
    }

    #[test]
    fn positions_resolve_to_definitions_references_and_includes() {
        use expect_test::expect;
        check(
            "root.toml",
            ROOT,
            "\"stack\"]",
            expect!["reference stack CheckOutput -> layer.toml@18..25"],
        );
        check(
            "layer.toml",
            LAYER,
            "\"x\"",
            expect![[r#"reference x RepeatInput { repeat: "stack" } -> root.toml@93..96"#]],
        );
        check(
            "layer.toml",
            LAYER,
            "\"h\"]",
            expect![[r#"reference h OpInput { op: "h_next" } -> layer.toml@56..59"#]],
        );
        check(
            "layer.toml",
            LAYER,
            "\"h_next\"\nop",
            expect![[r#"definition h_next (repeat op) in Some("stack")"#]],
        );
        check(
            "root.toml",
            ROOT,
            "\"layer",
            expect![[r#"include layer.toml"#]],
        );
        check(
            "layer.toml",
            LAYER,
            "\"gelu\"",
            expect![[r#"op kind gelu of h_next"#]],
        );
        check("root.toml", ROOT, "[project]", expect![[r#"nothing"#]]);
    }

    #[test]
    fn a_body_s_references_resolve_in_its_own_body_first() {
        let second = LAYER
            .replace("\"stack\"", "\"stack2\"")
            .replace("input = \"x\"", "input = \"stack\"");
        let layers = format!("{LAYER}\n{second}");
        let read = |path: &Utf8Path| -> crate::vfs::FileText {
            match path.as_str() {
                "root.toml" => Ok(Arc::from(ROOT)),
                "layer.toml" => Ok(Arc::from(layers.as_str())),
                _ => Err(crate::fsutil::ReadError::Missing),
            }
        };
        let index = ProjectIndex::of(&super::super::load::load(Utf8Path::new("root.toml"), &read));
        let resolved: Vec<String> = (index.references.iter())
            .filter(|r| r.file == "layer.toml")
            .map(|r| {
                let d = index.resolve(r).expect("defined");
                format!("{} -> {} {:?}", r.name, index.graph_name(d), d.name_span)
            })
            .collect();
        let at = |needle: &str, from: usize| layers[from..].find(needle).expect("needle") + from;
        let second_at = at("stack2", 0);
        // Each body's `h` and `h_next` are its own; `stack2` reads `stack`.
        assert_eq!(
            resolved,
            [
                format!("x -> x {:?}", 93..96),
                format!(
                    "h_next -> stack.h_next {:?}",
                    at("\"h_next\"\nop", 0)..at("\"h_next\"\nop", 0) + 8
                ),
                format!("h -> stack.h {:?}", at("\"h\"", 0)..at("\"h\"", 0) + 3),
                format!("stack -> stack {:?}", 18..25),
                format!(
                    "h_next -> stack2.h_next {:?}",
                    at("\"h_next\"\nop", second_at)..at("\"h_next\"\nop", second_at) + 8
                ),
                format!(
                    "h -> stack2.h {:?}",
                    at("\"h\"", second_at)..at("\"h\"", second_at) + 3
                ),
            ]
        );
    }

    #[test]
    fn body_locals_are_visible_inside_their_repeat_only() {
        let index = index();
        let names = |file: &str, offset| -> Vec<String> {
            index
                .visible_names(Utf8Path::new(file), offset)
                .iter()
                .map(|d| d.name.clone())
                .collect()
        };
        let inside = LAYER.find("inputs").expect("inputs");
        assert_eq!(names("layer.toml", inside), ["stack", "h", "h_next", "x"]);
        assert_eq!(names("root.toml", 0), ["stack", "x"]);
    }
}
