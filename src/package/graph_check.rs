//! The package's graph, checked the way a project is.
//!
//! The host reference, the runtime and `inspect` trust a [`Graph`]'s
//! invariants (shapes consistent with their operations, ids in range,
//! sizes that fit the target), which project validation establishes. A
//! package is a file people pass around, so its graph is not taken on
//! trust: it is written back as the project it stands for and validated
//! as one, and the result must be the graph itself. Everything the
//! validator refuses (a shape of 10^18 elements, an unknown check output,
//! a name that cannot name a file) is refused here with its message, and
//! anything the validator would have produced differently (a shape that
//! disagrees with its operation, tensors out of order) is refused as well.

use super::PackageError;
use crate::db::{FileText, ReadError};
use crate::graph::{Graph, Init, OpKind, ReferencePrecision, Role, Tensor, TensorId};
use camino::{Utf8Path, Utf8PathBuf};
use std::collections::BTreeMap;
use std::sync::Arc;
use toml::{Table, Value};

/// The root file of the project a graph is written back as.
const ROOT: &str = "package-graph.toml";

/// The directory of the files holding operations and repeats, relative to
/// the root.
const INCLUDE_DIR: &str = "graph";

/// Checks `graph`: it must be exactly what validating its own project gives.
pub(crate) fn check(graph: &Graph) -> Result<(), PackageError> {
    let files = project_files(graph).map_err(|message| PackageError::invalid("graph", message))?;
    let read = |path: &Utf8Path| -> FileText {
        files
            .get(path)
            .map(|text| Arc::from(text.as_str()))
            .ok_or(ReadError::Missing)
    };
    let result = crate::project::validate_with(Utf8Path::new(ROOT), &read, None);
    let Some(validated) = result.graph else {
        let first = result
            .diagnostics
            .iter()
            .find(|d| d.is_error())
            .map_or_else(|| "it does not validate".to_string(), |d| d.message.clone());
        return Err(PackageError::invalid("graph", first));
    };
    match first_difference(&validated, graph) {
        None => Ok(()),
        Some(difference) => Err(PackageError::invalid(
            "graph",
            format!("{difference} differs from what validating the graph's project gives"),
        )),
    }
}

/// The graph written as project files, body names as written: the root (with `[project]`, the
/// declared tensors and `[check]`) and the operations and repeats in graph
/// order. A file lists its operations before its repeats, so consecutive
/// runs of each go to files of their own and the validator meets them in
/// the graph's order.
fn project_files(graph: &Graph) -> Result<BTreeMap<Utf8PathBuf, String>, String> {
    let name = |id: TensorId| -> Result<&str, String> {
        graph
            .tensors
            .get(id.0 as usize)
            .map(Tensor::written_name)
            .ok_or_else(|| format!("tensor {} does not exist", id.0))
    };
    let mut root = Table::new();
    let mut project = Table::new();
    project.insert("name".into(), graph.name.clone().into());
    project.insert("target".into(), graph.target.name().into());
    project.insert("tiles".into(), i64::from(graph.tiles).into());
    let seed =
        i64::try_from(graph.seed).map_err(|_| format!("seed {} is too large", graph.seed))?;
    project.insert("seed".into(), seed.into());
    root.insert("project".into(), project.into());
    let declared = graph
        .tensors
        .iter()
        .filter(|t| t.role != Role::Activation && t.repeat.is_none())
        .map(tensor)
        .collect::<Result<Vec<_>, _>>()?;
    root.insert("tensor".into(), array(declared));

    // Runs of consecutive operations, then of repeats, one file each.
    let mut nodes: Vec<(bool, Table)> = Vec::new();
    let mut next = 0;
    while next < graph.ops.len() {
        let at = crate::graph::OpId(next as u32);
        match graph
            .repeats
            .iter()
            .position(|r| r.body.first() == Some(&at))
        {
            Some(index) => {
                let repeat = &graph.repeats[index];
                nodes.push((true, repeat_table(graph, index, &name)?));
                next += repeat.body.len().max(1);
            }
            None => {
                nodes.push((false, op(graph, next, &name)?));
                next += 1;
            }
        }
    }
    let mut files = BTreeMap::new();
    let mut includes = Vec::new();
    let mut run: Vec<(bool, Table)> = Vec::new();
    let mut flush = |run: &mut Vec<(bool, Table)>, files: &mut BTreeMap<Utf8PathBuf, String>| {
        if run.is_empty() {
            return Ok::<(), String>(());
        }
        let path = format!("{INCLUDE_DIR}/{}.toml", includes.len());
        let key = if run[0].0 { "repeat" } else { "op" };
        let mut file = Table::new();
        file.insert(key.into(), array(run.drain(..).map(|(_, t)| t).collect()));
        files.insert(Utf8PathBuf::from(&path), text(&file)?);
        includes.push(Value::from(path));
        Ok(())
    };
    for node in nodes {
        if run.first().is_some_and(|(repeat, _)| *repeat != node.0) {
            flush(&mut run, &mut files)?;
        }
        run.push(node);
    }
    flush(&mut run, &mut files)?;

    let check = &graph.check;
    let mut table = Table::new();
    let precision = match check.reference_precision {
        ReferencePrecision::Device => "device",
        ReferencePrecision::F32 => "f32",
    };
    table.insert("reference_precision".into(), precision.into());
    table.insert(
        "min_cosine_similarity".into(),
        check.min_cosine_similarity.into(),
    );
    table.insert("max_abs_error".into(), check.max_abs_error.into());
    let outputs = check
        .outputs
        .iter()
        .map(|&id| name(id).map(Value::from))
        .collect::<Result<Vec<_>, _>>()?;
    table.insert("outputs".into(), Value::Array(outputs));
    root.insert("check".into(), table.into());
    root.insert("include".into(), Value::Array(includes));
    files.insert(Utf8PathBuf::from(ROOT), text(&root)?);
    Ok(files)
}

fn text(table: &Table) -> Result<String, String> {
    toml::to_string(table).map_err(|e| format!("cannot be written as a project: {e}"))
}

fn array(tables: Vec<Table>) -> Value {
    Value::Array(tables.into_iter().map(Value::Table).collect())
}

fn dims(shape: &[usize]) -> Result<Value, String> {
    shape
        .iter()
        .map(|&d| {
            i64::try_from(d)
                .map(Value::from)
                .map_err(|_| format!("dimension {d} is too large"))
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Value::Array)
}

/// A declared tensor (an input or a weight) as a `[[tensor]]` table of
/// the root file.
fn tensor(t: &Tensor) -> Result<Table, String> {
    tensor_in(t, "")
}

/// A declared tensor as a `[[tensor]]` table of a file in `dir` (relative
/// to the root), whose tensor file paths resolve against that directory.
fn tensor_in(t: &Tensor, dir: &str) -> Result<Table, String> {
    let mut table = Table::new();
    table.insert("name".into(), t.written_name().into());
    table.insert("shape".into(), dims(&t.shape)?);
    table.insert("dtype".into(), t.dtype.name().into());
    if t.dtype.is_fp8() {
        table.insert("scale".into(), i64::from(t.scale).into());
    }
    let role = if t.role == Role::Input {
        "input"
    } else {
        "weight"
    };
    table.insert("role".into(), role.into());
    if let Some(init) = &t.init {
        let mut i = Table::new();
        match init {
            Init::Normal { std } => {
                i.insert("dist".into(), "normal".into());
                i.insert("std".into(), f64::from(*std).into());
            }
            Init::Uniform { scale } => {
                i.insert("dist".into(), "uniform".into());
                i.insert("scale".into(), f64::from(*scale).into());
            }
            Init::File { path, key } => {
                // The graph holds the path resolved against the root's
                // directory; from an include it is one level up.
                let written = if dir.is_empty() || Utf8Path::new(path).is_absolute() {
                    path.clone()
                } else {
                    format!("../{path}")
                };
                i.insert("file".into(), written.into());
                if let Some(key) = key {
                    i.insert("key".into(), key.clone().into());
                }
            }
            Init::Zeros => {
                i.insert("dist".into(), "zeros".into());
            }
            Init::Ones => {
                i.insert("dist".into(), "ones".into());
            }
        }
        table.insert("init".into(), i.into());
    }
    Ok(table)
}

/// Operation `index` as an `[[op]]` table.
fn op<'g>(
    graph: &'g Graph,
    index: usize,
    name: &dyn Fn(TensorId) -> Result<&'g str, String>,
) -> Result<Table, String> {
    let op = &graph.ops[index];
    let output = graph.tensors.get(op.output.0 as usize).ok_or_else(|| {
        format!(
            "operation {index} writes tensor {}, which does not exist",
            op.output.0
        )
    })?;
    let mut table = Table::new();
    // A body op's name as written (qualified again when validated).
    let written = output.written_name.as_ref().unwrap_or(&op.name);
    table.insert("name".into(), written.clone().into());
    table.insert("op".into(), op.kind.name().into());
    let inputs = op
        .inputs
        .iter()
        .map(|&id| name(id).map(Value::from))
        .collect::<Result<Vec<_>, _>>()?;
    table.insert("inputs".into(), Value::Array(inputs));
    if !op.kind.is_view() {
        table.insert("dtype".into(), output.dtype.name().into());
    }
    match &op.kind {
        // Projects write no epilogue (fusion adds it), so a package's
        // graph has none, and one that did fails the round trip.
        OpKind::Matmul { transpose_rhs, .. } => {
            if *transpose_rhs {
                table.insert("transpose_rhs".into(), true.into());
            }
        }
        OpKind::Cast => {
            if output.dtype.is_fp8() {
                table.insert("scale".into(), f64::from(output.scale).into());
            }
        }
        OpKind::Softmax { scale, causal } => {
            table.insert("scale".into(), f64::from(*scale).into());
            if *causal {
                table.insert("causal".into(), true.into());
            }
        }
        OpKind::Layernorm { epsilon } | OpKind::Rmsnorm { epsilon } => {
            table.insert("epsilon".into(), f64::from(*epsilon).into());
        }
        OpKind::Transpose { perm } => {
            table.insert("perm".into(), dims(perm)?);
        }
        OpKind::Reshape => {
            table.insert("shape".into(), dims(&output.shape)?);
        }
        OpKind::Rearrange { block } => {
            table.insert("block".into(), dims(block)?);
        }
        OpKind::Slice { axis, start } => {
            let end = output.shape.get(*axis).map_or(0, |len| start + len);
            for (key, value) in [("axis", *axis), ("start", *start), ("end", end)] {
                let value = i64::try_from(value)
                    .map_err(|_| format!("slice index {value} is too large"))?;
                table.insert(key.into(), value.into());
            }
        }
        OpKind::Concat { axis } => {
            let axis =
                i64::try_from(*axis).map_err(|_| format!("concat axis {axis} is too large"))?;
            table.insert("axis".into(), axis.into());
        }
        OpKind::Add
        | OpKind::Mul
        | OpKind::Sub
        | OpKind::Div
        | OpKind::Silu
        | OpKind::GeluTanh
        | OpKind::Gelu => {}
        OpKind::Reduce { .. } => {}
    }
    Ok(table)
}

/// Repeat `index`, with its weights and body, as a `[[repeat]]` table.
fn repeat_table<'g>(
    graph: &'g Graph,
    index: usize,
    name: &dyn Fn(TensorId) -> Result<&'g str, String>,
) -> Result<Table, String> {
    let repeat = &graph.repeats[index];
    let mut table = Table::new();
    table.insert("name".into(), repeat.name.clone().into());
    table.insert("count".into(), i64::from(repeat.count).into());
    table.insert("input".into(), name(repeat.init)?.into());
    table.insert("carry".into(), name(repeat.carry_in)?.into());
    table.insert("result".into(), name(repeat.carry_out)?.into());
    let weights = graph
        .tensors
        .iter()
        .filter(|t| t.repeat == Some(index as u32))
        .map(|t| tensor_in(t, INCLUDE_DIR))
        .collect::<Result<Vec<_>, _>>()?;
    table.insert("tensor".into(), array(weights));
    let body = repeat
        .body
        .iter()
        .map(|&id| match graph.ops.get(id.0 as usize) {
            Some(_) => op(graph, id.0 as usize, name),
            None => Err(format!(
                "repeat `{}` runs operation {}, which does not exist",
                repeat.name, id.0
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    table.insert("op".into(), array(body));
    Ok(table)
}

/// The first place two graphs differ, named for a message.
fn first_difference(expected: &Graph, found: &Graph) -> Option<String> {
    if expected.tensors.len() != found.tensors.len() {
        return Some(format!("the tensor count {}", found.tensors.len()));
    }
    if let Some((i, t)) = expected
        .tensors
        .iter()
        .zip(&found.tensors)
        .enumerate()
        .find(|(_, (a, b))| a != b)
        .map(|(i, (_, b))| (i, b))
    {
        return Some(format!("tensor {i} (`{}`)", t.name));
    }
    if expected.ops != found.ops {
        let i = expected
            .ops
            .iter()
            .zip(&found.ops)
            .position(|(a, b)| a != b)
            .unwrap_or(expected.ops.len().min(found.ops.len()));
        return Some(format!("operation {i}"));
    }
    if expected.repeats != found.repeats {
        return Some("a repeat".into());
    }
    if expected.outputs != found.outputs {
        return Some("the output list".into());
    }
    if expected != found {
        return Some("the project settings or check".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::{Database, Db};
    use crate::vfs::MemoryFs;
    use camino::Utf8Path;

    /// Every example project's graph passes, and survives being written
    /// back as a project unchanged.
    #[test]
    fn every_example_project_graph_passes() {
        let db = Database::new(Arc::new(crate::vfs::OsFs));
        let crate_dir = Utf8Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut checked = 0;
        // The regressions include repeats that share body names, which the
        // graph qualifies and the written-back project must not.
        let entries = ["projects", "tests/data/regressions"]
            .iter()
            .flat_map(|dir| std::fs::read_dir(crate_dir.join(dir)).expect("projects"));
        for entry in entries {
            let path = Utf8PathBuf::from_path_buf(entry.expect("entry").path()).expect("utf-8");
            if path.extension() != Some("toml") {
                continue;
            }
            let result = crate::project::project_graph(&db, db.file(&path));
            let graph = result.graph.clone().expect("valid project");
            check(&graph).unwrap_or_else(|e| panic!("{path}: {e}"));
            checked += 1;
        }
        assert!(checked >= 15);
    }

    fn graph_of(project: &str) -> Graph {
        let fs = MemoryFs::new();
        fs.write("p.toml", project);
        let db = Database::new(Arc::new(fs));
        let result = crate::project::project_graph(&db, db.file(Utf8Path::new("p.toml")));
        (*result.graph.clone().expect("valid")).clone()
    }

    const PROJECT: &str = r#"
[project]
name = "small"
target = "ipu21"
tiles = 4

[[tensor]]
name = "x"
shape = [8, 16]
dtype = "f16"
role = "input"

[[tensor]]
name = "w"
shape = [16, 16]
dtype = "f16"
role = "weight"

[[op]]
name = "y"
op = "matmul"
inputs = ["x", "w"]
dtype = "f16"

[check]
reference_precision = "f32"
min_cosine_similarity = 0.99
max_abs_error = 0.1
outputs = ["y"]
"#;

    #[test]
    fn shapes_ids_and_names_a_project_would_refuse_are_refused() {
        let graph = graph_of(PROJECT);
        assert!(check(&graph).is_ok());
        let refused = |change: &dyn Fn(&mut Graph)| {
            let mut g = graph.clone();
            change(&mut g);
            check(&g).expect_err("refused").to_string()
        };
        expect_test::expect!["invalid package (graph): a tensor of shape [1000000000, 1000000000] in f16 needs 2000000000000000000 bytes, more than the 2551488 bytes of memory of the 4 tiles the project may use"]
            .assert_eq(&refused(&|g| g.tensors[1].shape = vec![1_000_000_000, 1_000_000_000]));
        expect_test::expect!["invalid package (graph): dimension 9223372036854775809 is too large"]
            .assert_eq(&refused(&|g| {
                g.tensors[0].shape = vec![(1 << 63) + 1, 8192]
            }));
        expect_test::expect!["invalid package (graph): tensor 9999 does not exist"]
            .assert_eq(&refused(&|g| g.check.outputs = vec![TensorId(9999)]));
        expect_test::expect!["invalid package (graph): tensor 2 (`y`) differs from what validating the graph's project gives"]
            .assert_eq(&refused(&|g| g.tensors[2].shape = vec![8, 17]));
        expect_test::expect!["invalid package (graph): the project name cannot name a package file: it contains '/'; use letters, digits, `_`, `-` and `.`"]
            .assert_eq(&refused(&|g| g.name = "../../x".into()));
        expect_test::expect![
            "invalid package (graph): none of the `[check] outputs` is computed by the program"
        ]
        .assert_eq(&refused(&|g| g.check.outputs = vec![TensorId(0)]));
    }
}
