//! Hover: what a name is, and for an op how the compiler runs it.
//!
//! Tensors show shape, dtype, scale and role from the validated graph;
//! ops also show the plan the compiler chose for them (the partition, the
//! tiles it uses, the kernel and its source, estimated cycles and the
//! memory a tile needs), from the same per-signature plan queries a build
//! uses, so a hover after a build costs nothing and a hover before one
//! plans only that op's signature (and lowers once, to settle on plans that
//! fit). In a kernel source, see [`super::kernel::hover`].

use super::position::LineIndex;
use super::session::Session;
use crate::db::Db as _;
use crate::graph::{Graph, Role, Tensor};
use crate::project::index::{DefinitionKind, IndexItem};
use camino::Utf8Path;
use lsp_types::{Hover, HoverContents, MarkupContent, MarkupKind, Position, Uri};
use std::fmt::Write as _;

pub(super) fn hover(session: &Session, uri: &Uri, position: Position) -> Option<Hover> {
    let (path, text) = session.document(uri)?;
    let index = LineIndex::new(&text);
    let offset = index.offset(position);
    let value = if path.extension() == Some("toml") {
        project_hover(session, &path, offset)?
    } else {
        super::kernel::hover(session, &path, &text, offset)?
    };
    Some(Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value,
        }),
        range: None,
    })
}

fn project_hover(session: &Session, path: &Utf8Path, offset: usize) -> Option<String> {
    let root = session.root_of(path)?;
    let db = &session.db;
    let file = db.file(&root);
    let index = crate::project::project_index(db, file);
    let graph = crate::project::project_graph(db, file).graph.clone();
    let definition = match index.at(path, offset)? {
        IndexItem::Definition(d) => d,
        IndexItem::Reference(r) => index.resolve(r)?,
        IndexItem::Include(include) => {
            let defined = index
                .definitions
                .iter()
                .filter(|d| d.file == include.target && d.repeat.is_none())
                .count();
            return Some(format!(
                "**include** `{}`\n\n{defined} tensors, ops and repeats",
                include.target
            ));
        }
        IndexItem::OpKind(kind) => {
            let mut out = format!("**op** `{}`", kind.kind);
            if let Some(graph) = &graph {
                plan_section(session, &root, graph, &kind.op, &mut out);
            }
            return Some(out);
        }
    };
    let name = &definition.name;
    let mut out = format!("**{}** `{name}`", definition.kind.describe());
    if let Some(repeat) = &definition.repeat {
        let _ = write!(out, " in repeat `{repeat}`");
    }
    let Some(graph) = graph else {
        out.push_str("\n\nthe project has errors: no shapes or plans until they are fixed");
        return Some(out);
    };
    // A body name other repeats use too is qualified in the graph.
    let name = &index.graph_name(definition);
    if let Some(tensor) = graph.tensors.iter().find(|t| &t.name == name) {
        out.push_str("\n\n");
        out.push_str(&describe_tensor(tensor));
    }
    match definition.kind {
        DefinitionKind::Op | DefinitionKind::BodyOp => {
            plan_section(session, &root, &graph, name, &mut out);
        }
        DefinitionKind::Repeat => {
            if let Some(repeat) = graph.repeats.iter().find(|r| &r.name == name) {
                let body: Vec<&str> = repeat
                    .body
                    .iter()
                    .map(|op| graph.op(*op).name.as_str())
                    .collect();
                let _ = write!(
                    out,
                    "\n\n{} iterations; carry `{}` from `{}`, next carry `{}`; body: {}",
                    repeat.count,
                    graph.tensor(repeat.carry_in).name,
                    graph.tensor(repeat.init).name,
                    graph.tensor(repeat.carry_out).name,
                    body.join(", ")
                );
            }
        }
        _ => {}
    }
    Some(out)
}

/// `f16[8, 16]`, its size, scale and role.
fn describe_tensor(tensor: &Tensor) -> String {
    let mut out = format!(
        "`{}{:?}` ({} elements, {} bytes)",
        tensor.dtype,
        tensor.shape,
        tensor.element_count(),
        tensor.size_bytes()
    );
    if tensor.dtype.is_fp8() {
        let _ = write!(out, ", scale 2^{}", tensor.scale);
    }
    let role = match tensor.role {
        Role::Input => "input, streamed from the host at each run",
        Role::Weight if tensor.repeat.is_some() => "weight, one instance per iteration",
        Role::Weight => "weight, loaded with the package",
        Role::Activation => "activation, computed by the program",
    };
    let _ = write!(out, "\n\nrole: {role}");
    if let Some(init) = &tensor.init {
        let _ = write!(out, "; init {init:?}");
    }
    out
}

/// The chosen plan of op `name` (after legalization, which may have
/// removed it as unread).
fn plan_section(session: &Session, root: &Utf8Path, graph: &Graph, name: &str, out: &mut String) {
    let db = &session.db;
    let file = db.file(root);
    if let Some(op) = graph.ops.iter().find(|o| o.name == name) {
        let _ = write!(out, "\n\nop `{}`", op.kind.name());
    }
    let Ok(legal) = crate::pipeline::graph(db, file) else {
        return;
    };
    let Some(position) = planned_position(&legal, name) else {
        out.push_str("\n\nnot planned: nothing reads its result, so it is removed");
        return;
    };
    let planned = &legal.ops[position].name;
    if planned != name {
        let _ = write!(out, "\n\nfused into `{planned}`, planned as one operation");
    }
    let signatures = crate::pipeline::planned_signatures(db, file);
    let Some(signature) = signatures.get(position) else {
        return;
    };
    let plans =
        crate::pipeline::operator_plans(db, crate::pipeline::Signature::new(db, signature.clone()));
    let chosen = plans.selected();
    let estimate = &chosen.estimate;
    let _ = write!(
        out,
        "\n\n**plan** {} on {} tiles\n\n- estimated {} cycles (compute {}, exchange {}, sync {})\n- memory per tile: {} bytes standard, {} bytes interleaved\n- {} candidates costed, {} finalists",
        crate::plan::describe(&chosen.partition),
        chosen.tiles_used,
        estimate.total_cycles(),
        estimate.compute_cycles,
        estimate.exchange_cycles,
        estimate.sync_cycles,
        estimate.peak_standard_bytes,
        estimate.peak_interleaved_bytes,
        plans.candidates,
        plans.finalists.len()
    );
    if let Some(source) = kernel_source(session, root, &chosen.partition) {
        let _ = write!(out, "\n- kernel source `{source}`");
    }
}

/// The kernel source a partition's kernel is assembled from.
pub(super) fn kernel_source(
    session: &Session,
    root: &Utf8Path,
    partition: &crate::plan::Partition,
) -> Option<camino::Utf8PathBuf> {
    let kernel = match partition {
        crate::plan::Partition::Matmul { kernel, .. }
        | crate::plan::Partition::Rows { kernel, .. }
        | crate::plan::Partition::Elements { kernel, .. }
        | crate::plan::Partition::Segments { kernel, .. } => kernel,
        crate::plan::Partition::View => return None,
        crate::plan::Partition::Gathered { .. } => return None,
    };
    let kernel_dir = session.kernel_dir(root);
    crate::pipeline::kernels::variant_of(*kernel, &kernel_dir).map(|v| v.source)
}

/// The chosen partition of op `name` of the project `root`.
pub(super) fn chosen_partition(
    session: &Session,
    root: &Utf8Path,
    name: &str,
) -> Option<crate::plan::Partition> {
    let db = &session.db;
    let file = db.file(root);
    let legal = crate::pipeline::graph(db, file).ok()?;
    let position = planned_position(&legal, name)?;
    let signature = crate::pipeline::planned_signatures(db, file)
        .get(position)?
        .clone();
    let plans = crate::pipeline::operator_plans(db, crate::pipeline::Signature::new(db, signature));
    Some(plans.selected().partition.clone())
}

/// Where op `name` is planned in the legalized graph: its own operation,
/// or the fused one it was merged into (named for the operations it
/// merges, `fc1+fc1_bias+gelu`); `None` when legalization removed it.
fn planned_position(legal: &Graph, name: &str) -> Option<usize> {
    (legal.ops.iter().position(|o| o.name == name))
        .or_else(|| (legal.ops.iter()).position(|o| o.name.split('+').any(|part| part == name)))
}
