//! From parsed files to a validated [`Graph`].
//!
//! Names live in one namespace across the root file and its includes:
//! declared tensors, op outputs (an op's name is its output's name) and
//! repeat outputs (a repeat's name). Each repeat's carry, weights and body
//! ops are local to its body: they may not reuse an outer name, but two
//! repeats may use the same ones (see [`super::scope`]).
//! Operations may be written in any order; they are sorted by their data
//! dependencies (declaration order breaks ties), and a dependency cycle is
//! an error.

use super::load::{key_span, Loaded, LoadedFile};
use super::shapes::{self, suggest, Input, DTYPE_NAMES};
use super::syntax::{OpAst, RepeatAst, TensorAst};
use super::Site;
use crate::data::TensorIndex;
use crate::diagnostic::Diagnostic;
use crate::graph::*;
use crate::target::TargetId;
use std::collections::{HashMap, HashSet};
use std::ops::Range;
use toml::Spanned;

/// Reads the index of a tensor file, for checking inits from files.
pub(super) type TensorFiles<'a> =
    dyn Fn(&camino::Utf8Path) -> Result<std::sync::Arc<TensorIndex>, crate::data::DataError> + 'a;

/// Validates `loaded`. With `files`, every init from a tensor file is
/// checked against the file; without (a package's graph, whose values
/// travel with it), only its form is.
pub(super) fn validate(
    loaded: &Loaded,
    files: Option<&TensorFiles<'_>>,
) -> (Option<Graph>, Vec<Diagnostic>) {
    let mut v = Validator {
        file_inits: Vec::new(),
        files: &loaded.files,
        diagnostics: loaded.diagnostics.clone(),
        defined: HashMap::new(),
        shared: super::scope::shared_body_names(&loaded.files),
        body: None,
        env: HashMap::new(),
        body_local: HashMap::new(),
        poisoned: HashSet::new(),
        graph: Graph {
            name: String::new(),
            // Until `[project]` names one, checks that need a machine use
            // the default target; a wrong name is reported there.
            target: TargetId::default(),
            tiles: 0,
            seed: 0,
            tensors: Vec::new(),
            ops: Vec::new(),
            repeats: Vec::new(),
            outputs: Vec::new(),
            check: Check {
                reference_precision: ReferencePrecision::Device,
                min_cosine_similarity: 0.0,
                max_abs_error: 0.0,
                outputs: Vec::new(),
            },
        },
    };
    if loaded.files.is_empty() {
        return (None, v.diagnostics);
    }
    if let Some(diagnostic) = super::load::too_many_names(loaded) {
        v.diagnostics.push(diagnostic);
        return (None, v.diagnostics);
    }
    v.project();
    v.names();
    v.declared_tensors();
    v.nodes();
    v.resident();
    v.check();
    if let Some(files) = files {
        if !v.diagnostics.iter().any(Diagnostic::is_error) {
            v.tensor_files(files);
        }
    }
    if v.diagnostics.iter().any(Diagnostic::is_error) {
        (None, v.diagnostics)
    } else {
        (Some(v.graph), v.diagnostics)
    }
}

struct Validator<'a> {
    files: &'a [LoadedFile],
    diagnostics: Vec<Diagnostic>,
    /// Every accepted definition of a name: the repeat whose body holds
    /// it (if any), file index and span.
    defined: HashMap<String, Vec<Definition<'a>>>,
    /// Body names more than one repeat uses, qualified in the graph.
    shared: HashSet<String>,
    /// The repeat whose body is being added.
    body: Option<&'a str>,
    /// Names visible to outer operations.
    env: HashMap<String, TensorId>,
    /// Names local to a repeat body, with the repeat's name.
    body_local: HashMap<String, String>,
    /// Names whose definition failed; references to them are not reported.
    poisoned: HashSet<String>,
    /// Tensors initialised from files, with the file and span of the init.
    file_inits: Vec<(TensorId, usize, Range<usize>)>,
    graph: Graph,
}

/// Where a name is defined: the repeat whose body holds it (if any), the
/// file index and the span.
type Definition<'a> = (Option<&'a str>, usize, Range<usize>);

/// What is wrong with entry `key` of `index` as the values of `tensor`.
fn entry_problem(index: &TensorIndex, key: &str, tensor: &Tensor) -> Option<String> {
    let what = if key.is_empty() {
        "the array".to_string()
    } else {
        format!("`{key}`")
    };
    let Some(entry) = index.get(key) else {
        return Some(format!("the file has no tensor `{key}`"));
    };
    if let crate::data::ElementType::Unsupported(dtype) = &entry.dtype {
        return Some(format!(
            "{what} holds {dtype} values; ipub converts f64, f32, f16 and bf16"
        ));
    }
    if entry.shape != tensor.shape {
        return Some(format!(
            "{what} has shape {:?}, but `{}` is declared {:?}",
            entry.shape, tensor.name, tensor.shape
        ));
    }
    None
}

/// An outer operation or repeat, in a file.
#[derive(Clone, Copy)]
enum Node<'a> {
    Op(usize, &'a Spanned<OpAst>),
    Repeat(usize, &'a Spanned<RepeatAst>),
}

impl<'a> Validator<'a> {
    fn site(&self, file: usize) -> Site<'a> {
        let f = &self.files[file];
        Site { path: &f.path }
    }

    fn root(&self) -> usize {
        self.files.iter().position(|f| f.is_root).unwrap_or(0)
    }

    fn project(&mut self) {
        for (i, file) in self.files.iter().enumerate() {
            if file.is_root {
                continue;
            }
            let site = self.site(i);
            if let Some(p) = &file.ast.project {
                self.diagnostics.push(
                    site.error(
                        "only the root project file may have a [project] table",
                        p.span(),
                    )
                    .note("included files share tensors, ops and repeats"),
                );
            }
            if let Some(c) = &file.ast.check {
                self.diagnostics.push(site.error(
                    "only the root project file may have a [check] table",
                    c.span(),
                ));
            }
        }
        let root = self.root();
        let site = self.site(root);
        let Some(project) = &self.files[root].ast.project else {
            self.diagnostics.push(
                site.error("missing [project] table", 0..0)
                    .help("add [project] with name, target, tiles and seed"),
            );
            return;
        };
        let p = project.get_ref();
        self.graph.name = p.name.get_ref().clone();
        if let Some(problem) = super::limits::file_name_problem(p.name.get_ref()) {
            self.diagnostics.push(
                site.error(
                    format!("the project name cannot name a package file: {problem}"),
                    p.name.span(),
                )
                .note("packages and profiles are written as NAME.ipuexe and NAME.profile.json"),
            );
        }
        let Some(id) = TargetId::from_name(p.target.get_ref()) else {
            let known = TargetId::ALL.map(TargetId::name);
            self.diagnostics.push(
                suggest(
                    site.error(
                        format!("unknown target `{}`", p.target.get_ref()),
                        p.target.span(),
                    ),
                    p.target.get_ref(),
                    &known,
                )
                .help(match &known[..] {
                    [one] => format!("the supported target is `{one}`"),
                    _ => format!("the supported targets are `{}`", known.join("`, `")),
                }),
            );
            return;
        };
        self.graph.target = id;
        let target = id.spec();
        let tiles = *p.tiles.get_ref();
        if tiles < 1 || tiles > i64::from(target.tiles) {
            self.diagnostics.push(
                site.error(
                    format!("`tiles = {tiles}` is beyond the target"),
                    p.tiles.span(),
                )
                .label(format!("{} has {} tiles", target.name, target.tiles))
                .help(format!("use between 1 and {}", target.tiles)),
            );
        } else {
            self.graph.tiles = tiles as u32;
        }
        match &p.seed {
            Some(seed) if *seed.get_ref() < 0 => self
                .diagnostics
                .push(site.error("`seed` must not be negative", seed.span())),
            Some(seed) => self.graph.seed = *seed.get_ref() as u64,
            None => {}
        }
    }

    /// Records every name and reports unusable names and duplicates.
    fn names(&mut self) {
        let mut entries: Vec<(usize, &'a Spanned<String>, &str, Option<&'a str>)> = Vec::new();
        for (i, file) in self.files.iter().enumerate() {
            for t in &file.ast.tensor {
                entries.push((i, &t.get_ref().name, "tensor", None));
            }
            for o in &file.ast.op {
                entries.push((i, &o.get_ref().name, "op", None));
            }
            for r in &file.ast.repeat {
                let r = r.get_ref();
                entries.push((i, &r.name, "repeat", None));
                let owner = Some(r.name.get_ref().as_str());
                entries.push((i, &r.carry, "carry", owner));
                for t in &r.tensor {
                    entries.push((i, &t.get_ref().name, "tensor", owner));
                }
                for o in &r.op {
                    entries.push((i, &o.get_ref().name, "op", owner));
                }
            }
        }
        for (file, name, kind, owner) in entries {
            // The name is still defined below, so what reads it reports
            // nothing more.
            if let Some(problem) = super::limits::name_problem(name.get_ref()) {
                self.diagnostics.push(
                    self.site(file)
                        .error(
                            format!("invalid {kind} name {:?}: {problem}", name.get_ref()),
                            name.span(),
                        )
                        .note("names become file names: `ipub run --dump` writes NAME.npy")
                        .help(
                            "a name may hold any character but `/`, `\\` and control characters, as in `fc1.bias` or `q+k`",
                        ),
                );
            }
            // An outer name clashes with every other definition; a body
            // name with outer names and with its own body's.
            let clash = self.defined.get(name.get_ref()).and_then(|earlier| {
                earlier
                    .iter()
                    .find(|(scope, _, _)| scope.is_none() || owner.is_none() || *scope == owner)
            });
            if let Some((_, first_file, first_span)) = clash {
                let (line, column) =
                    crate::diagnostic::line_column(&self.files[*first_file].text, first_span.start);
                let first = format!("{}:{line}:{column}", self.files[*first_file].path);
                let diagnostic = self
                    .site(file)
                    .error(format!("duplicate name `{}`", name.get_ref()), name.span())
                    .note(format!("first defined at {first}"));
                self.diagnostics.push(diagnostic);
                self.poisoned.insert(name.get_ref().clone());
                continue;
            }
            self.defined
                .entry(name.get_ref().clone())
                .or_default()
                .push((owner, file, name.span()));
            if let Some(owner) = owner {
                self.body_local
                    .entry(name.get_ref().clone())
                    .or_insert_with(|| owner.to_string());
            }
        }
        self.qualified_clashes();
    }

    /// Reports a shared body name whose qualified graph name (`enc.h`) is
    /// also the name of something else.
    fn qualified_clashes(&mut self) {
        let mut qualified_names: Vec<(String, usize, Range<usize>, &String, &str)> = Vec::new();
        for (name, definitions) in &self.defined {
            for (owner, file, span) in definitions {
                if let Some(owner) = owner.filter(|_| self.shared.contains(name)) {
                    let qualified = super::scope::graph_name(Some(owner), name, &self.shared);
                    qualified_names.push((qualified, *file, span.clone(), name, owner));
                }
            }
        }
        let mut uses: HashMap<&str, usize> = HashMap::new();
        for (qualified, ..) in &qualified_names {
            *uses.entry(qualified.as_str()).or_default() += 1;
        }
        // Taken by a name as written, or by another qualified name
        // (`a.b` + `c` and `a` + `b.c`).
        // The other definition: the name as written, else the other body
        // name qualified alike.
        let other = |q: &str, file: usize, span: &Range<usize>| {
            let written = self.defined.get(q).and_then(|d| d.first());
            let qualified = qualified_names
                .iter()
                .find(|(o, f, s, ..)| o == q && (*f, s) != (file, span));
            written
                .map(|(_, f, s)| (*f, s.clone()))
                .or_else(|| qualified.map(|(_, f, s, ..)| (*f, s.clone())))
        };
        let mut clashes: Vec<_> = (qualified_names.iter())
            .filter(|(q, ..)| self.defined.contains_key(q) || uses[q.as_str()] > 1)
            .map(|(q, file, span, name, owner)| {
                let other = other(q, *file, span);
                (
                    *file,
                    span.clone(),
                    (*name).clone(),
                    *owner,
                    q.clone(),
                    other,
                )
            })
            .collect();
        clashes.sort_by_key(|(file, span, ..)| (*file, span.start));
        for (file, span, name, owner, qualified, other) in clashes {
            let mut diagnostic = self
                .site(file)
                .error(
                    format!("`{name}` of repeat `{owner}` is known as `{qualified}`, which names something else too"),
                    span,
                )
                .note("a body name that several repeats use is qualified with its repeat's name outside the body (in dumps, the profile and plans)");
            if let Some((other_file, other_span)) = other {
                let (line, column) =
                    crate::diagnostic::line_column(&self.files[other_file].text, other_span.start);
                let path = &self.files[other_file].path;
                diagnostic = diagnostic.note(format!(
                    "`{qualified}` is also defined at {path}:{line}:{column}"
                ));
            }
            self.diagnostics
                .push(diagnostic.help(format!("rename `{name}` or the other `{qualified}`")));
            self.poisoned.insert(name);
        }
    }

    /// The graph's name for `name` defined in the body being added (or
    /// outside any body).
    fn graph_name(&self, name: &str) -> String {
        super::scope::graph_name(self.body, name, &self.shared)
    }

    fn declared_tensors(&mut self) {
        for (i, file) in self.files.iter().enumerate() {
            for t in &file.ast.tensor {
                if let Some(id) = self.tensor(i, t, None) {
                    self.env.insert(t.get_ref().name.get_ref().clone(), id);
                }
            }
        }
    }

    /// Adds a declared tensor (an input or a weight).
    fn tensor(
        &mut self,
        file: usize,
        t: &Spanned<TensorAst>,
        repeat: Option<u32>,
    ) -> Option<TensorId> {
        let site = self.site(file);
        let ast = t.get_ref();
        let name = ast.name.get_ref().clone();
        let mut file_init = None;
        let result = (|| {
            let dtype = DType::from_name(ast.dtype.get_ref()).ok_or_else(|| {
                suggest(
                    site.error(
                        format!("unknown dtype `{}`", ast.dtype.get_ref()),
                        ast.dtype.span(),
                    ),
                    ast.dtype.get_ref(),
                    DTYPE_NAMES,
                )
                .help("dtypes are f32, f16, f143, f152")
            })?;
            let role = match ast.role.get_ref().as_str() {
                "input" if repeat.is_some() => {
                    return Err(site
                        .error("a repeat body can only declare weights", ast.role.span())
                        .note("each iteration gets its own instance of a body weight; inputs belong outside the repeat"))
                }
                "input" => Role::Input,
                "weight" => Role::Weight,
                other => {
                    return Err(suggest(
                        site.error(format!("unknown role `{other}`"), ast.role.span()),
                        other,
                        &["input", "weight"],
                    )
                    .help("roles are `input` (streamed at each run) and `weight` (loaded with the package)"))
                }
            };
            let mut shape = Vec::new();
            for d in ast.shape.get_ref() {
                match usize::try_from(*d.get_ref()) {
                    Ok(n) if n > 0 => shape.push(n),
                    _ => {
                        return Err(site.error(
                            format!("dimension {} must be positive", d.get_ref()),
                            d.span(),
                        ))
                    }
                }
            }
            if shape.is_empty() || shape.len() > crate::graph::MAX_RANK {
                return Err(site.error(
                    format!(
                        "a tensor needs 1 to {} dimensions, found {}",
                        crate::graph::MAX_RANK,
                        shape.len()
                    ),
                    ast.shape.span(),
                ));
            }
            if let Some(problem) = self.too_large(&shape, dtype) {
                return Err(site.error(problem, ast.shape.span()));
            }
            let scale = match &ast.scale {
                Some(s) if !dtype.is_fp8() => {
                    return Err(site.error(
                        format!("`scale` only applies to FP8 tensors, not {dtype}"),
                        s.span(),
                    ))
                }
                Some(s) => shapes::fp8_scale(&site, *s.get_ref() as f64, s.span())?,
                None => 0,
            };
            let init = match &ast.init {
                None => Init::Normal { std: 1.0 },
                Some(init) => {
                    let init = self.init(file, init)?;
                    if matches!(init, Init::File { .. }) {
                        file_init = Some(ast.init.as_ref().map_or(0..0, Spanned::span));
                    }
                    init
                }
            };
            let graph_name = self.graph_name(&name);
            Ok(Tensor {
                written_name: (graph_name != name).then(|| name.clone()),
                name: graph_name,
                shape,
                dtype,
                scale,
                role,
                init: Some(init),
                repeat,
            })
        })();
        match result {
            Ok(tensor) => {
                self.graph.tensors.push(tensor);
                let id = TensorId(self.graph.tensors.len() as u32 - 1);
                if let Some(span) = file_init {
                    self.file_inits.push((id, file, span));
                }
                Some(id)
            }
            Err(diagnostic) => {
                self.diagnostics.push(diagnostic);
                self.poisoned.insert(name);
                None
            }
        }
    }

    fn init(
        &self,
        file: usize,
        init: &Spanned<super::syntax::InitAst>,
    ) -> Result<Init, Diagnostic> {
        let site = self.site(file);
        let ast = init.get_ref();
        if let Some(path) = &ast.file {
            return self.file_init(file, init, path);
        }
        if let Some(key) = &ast.key {
            return Err(site.error(
                "`key` names an entry of a tensor file; add `file`",
                key.span(),
            ));
        }
        let Some(dist) = &ast.dist else {
            return Err(site
                .error("an init needs `dist` or `file`", init.span())
                .help("use dist = normal (std), uniform (scale), zeros or ones, or file = \"weights.safetensors\" with a key"));
        };
        let number = |v: &Option<Spanned<f64>>, key: &str| -> Result<f32, Diagnostic> {
            match v {
                // The generator works in f32: the value must be one.
                Some(x) if (*x.get_ref() as f32).is_finite() && *x.get_ref() as f32 > 0.0 => {
                    Ok(*x.get_ref() as f32)
                }
                Some(x) => Err(site.error(
                    format!(
                        "`{key}` must be a positive number within f32 range (up to {:e})",
                        f32::MAX
                    ),
                    x.span(),
                )),
                None => Err(site.error(
                    format!("`{}` init needs `{key}`", dist.get_ref()),
                    init.span(),
                )),
            }
        };
        let unexpected = |v: &Option<Spanned<f64>>, key: &str| -> Result<(), Diagnostic> {
            match v {
                Some(x) => Err(site.error(
                    format!("`{key}` does not apply to a `{}` init", dist.get_ref()),
                    x.span(),
                )),
                None => Ok(()),
            }
        };
        match dist.get_ref().as_str() {
            "normal" => {
                unexpected(&ast.scale, "scale")?;
                Ok(Init::Normal {
                    std: number(&ast.std, "std")?,
                })
            }
            "uniform" => {
                unexpected(&ast.std, "std")?;
                Ok(Init::Uniform {
                    scale: number(&ast.scale, "scale")?,
                })
            }
            "zeros" | "ones" => {
                unexpected(&ast.std, "std")?;
                unexpected(&ast.scale, "scale")?;
                Ok(if dist.get_ref() == "zeros" {
                    Init::Zeros
                } else {
                    Init::Ones
                })
            }
            other => Err(suggest(
                site.error(format!("unknown init distribution `{other}`"), dist.span()),
                other,
                &["normal", "uniform", "zeros", "ones"],
            )
            .help("use normal (std), uniform (scale), zeros or ones, or a tensor file")),
        }
    }

    /// An init from a tensor file: the path resolved against the declaring
    /// file, and the key's form checked. Whether the file holds the key
    /// with the right shape is checked once the graph is complete
    /// ([`Validator::tensor_files`]), when the repeat counts are known.
    fn file_init(
        &self,
        file: usize,
        init: &Spanned<super::syntax::InitAst>,
        path: &Spanned<String>,
    ) -> Result<Init, Diagnostic> {
        let site = self.site(file);
        let ast = init.get_ref();
        for (value, key) in [(&ast.std, "std"), (&ast.scale, "scale")] {
            if let Some(v) = value {
                return Err(site.error(
                    format!("`{key}` does not apply to an init from a file"),
                    v.span(),
                ));
            }
        }
        if let Some(dist) = &ast.dist {
            return Err(site.error("an init has either `dist` or `file`, not both", dist.span()));
        }
        let resolved = super::load::resolve(&self.files[file].path, path.get_ref());
        let key =
            match (crate::data::FileFormat::of(resolved.as_str()), &ast.key) {
                (None, _) => {
                    return Err(site
                        .error(
                            format!("`{}` is not a tensor file ipub reads", path.get_ref()),
                            path.span(),
                        )
                        .help("tensor files end in `.safetensors` (with `key`) or `.npy`"))
                }
                (Some(crate::data::FileFormat::Safetensors), None) => return Err(site
                    .error(
                        "an init from a `.safetensors` file needs `key`",
                        init.span(),
                    )
                    .help(
                        "name the entry, for example key = \"encoder.layers.{i}.mlp.fc1.weight\"",
                    )),
                (Some(crate::data::FileFormat::Npy), Some(key)) => {
                    return Err(site.error(
                        "`key` does not apply to an `.npy` file, which holds one array",
                        key.span(),
                    ))
                }
                (Some(crate::data::FileFormat::Safetensors), Some(key)) => {
                    if key.get_ref().is_empty() {
                        return Err(site.error("the key is empty", key.span()));
                    }
                    Some(key.get_ref().clone())
                }
                (Some(crate::data::FileFormat::Npy), None) => None,
            };
        Ok(Init::File {
            path: resolved.into_string(),
            key,
        })
    }

    /// Checks every init from a tensor file against the file's index: the
    /// file is readable and valid, holds the key (each iteration's, for a
    /// repeat's weight), in a dtype ipub converts and the declared shape.
    fn tensor_files(&mut self, files: &TensorFiles<'_>) {
        let sites = std::mem::take(&mut self.file_inits);
        for (id, file, span) in sites {
            let tensor = self.graph.tensor(id).clone();
            let Some(Init::File { path, key }) = &tensor.init else {
                continue;
            };
            let site = self.site(file);
            let path = camino::Utf8Path::new(path);
            let index = match files(path) {
                Ok(index) => index,
                Err(error) => {
                    self.diagnostics.push(
                        site.error(
                            format!("cannot read tensor file `{path}`: {error}"),
                            span.clone(),
                        )
                        .label(format!("`{}` reads its values here", tensor.name)),
                    );
                    continue;
                }
            };
            let iterations: Vec<Option<u32>> = match tensor.repeat {
                Some(r) => (0..self.graph.repeats.get(r as usize).map_or(0, |r| r.count))
                    .map(Some)
                    .collect(),
                None => vec![None],
            };
            let pattern = key.as_deref().unwrap_or(crate::data::NPY_KEY);
            if tensor.repeat.is_none() && pattern.contains(crate::data::ITERATION) {
                self.diagnostics.push(
                    site.error(
                        format!("`{}` in a key stands for the repeat iteration, but `{}` is not a repeat's weight", crate::data::ITERATION, tensor.name),
                        span.clone(),
                    ),
                );
                continue;
            }
            for iteration in iterations {
                let key = crate::data::iteration_key(pattern, iteration);
                if let Some(problem) = entry_problem(&index, &key, &tensor) {
                    let mut diagnostic = site.error(format!("`{path}`: {problem}"), span.clone());
                    if index.get(&key).is_none() {
                        let near = index.near_keys(&key, 5);
                        if !near.is_empty() {
                            diagnostic = diagnostic.note(format!(
                                "keys in the file that come close: {}",
                                near.join(", ")
                            ));
                        }
                    }
                    self.diagnostics.push(diagnostic);
                    break;
                }
            }
        }
    }

    /// Sorts the outer ops and repeats by dependency and adds them.
    fn nodes(&mut self) {
        let mut nodes: Vec<Node<'a>> = Vec::new();
        for (i, file) in self.files.iter().enumerate() {
            nodes.extend(file.ast.op.iter().map(|o| Node::Op(i, o)));
            nodes.extend(file.ast.repeat.iter().map(|r| Node::Repeat(i, r)));
        }
        let outputs = first_index(nodes.iter().map(|n| node_name(*n)));
        let deps: Vec<Vec<(usize, &Spanned<String>)>> = nodes
            .iter()
            .map(|n| {
                node_inputs(*n)
                    .into_iter()
                    .filter_map(|name| outputs.get(name.get_ref().as_str()).map(|&p| (p, name)))
                    .collect()
            })
            .collect();
        for index in self.topological(&nodes, &deps) {
            match nodes[index] {
                Node::Op(file, op) => {
                    // `op` reads the names it sees and never changes them.
                    let env = std::mem::take(&mut self.env);
                    let id = self.op(file, op, &env);
                    self.env = env;
                    if let Some(id) = id {
                        self.env.insert(op.get_ref().name.get_ref().clone(), id);
                    }
                }
                Node::Repeat(file, repeat) => self.repeat(file, repeat),
            }
        }
    }

    /// Kahn's algorithm, taking the first ready node in declaration order;
    /// reports a cycle among what remains.
    fn topological(
        &mut self,
        nodes: &[Node<'a>],
        deps: &[Vec<(usize, &Spanned<String>)>],
    ) -> Vec<usize> {
        // The ready nodes in a heap by declaration order: the first ready
        // one is taken each time, in O(n log n) rather than a scan per
        // step.
        use std::cmp::Reverse;
        let mut waiting = vec![0usize; nodes.len()];
        let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
        for (i, node_deps) in deps.iter().enumerate() {
            // A node reading its own name is a cycle of one, unless the
            // name is a duplicate (already reported), which then reads the
            // first definition.
            let duplicate = self.poisoned.contains(node_name(nodes[i]));
            for &(d, _) in node_deps.iter().filter(|(d, _)| *d != i || !duplicate) {
                waiting[i] += 1;
                dependents[d].push(i);
            }
        }
        let mut ready: std::collections::BinaryHeap<Reverse<usize>> = (0..nodes.len())
            .filter(|&i| waiting[i] == 0)
            .map(Reverse)
            .collect();
        let mut done = vec![false; nodes.len()];
        let mut order = Vec::new();
        while let Some(Reverse(next)) = ready.pop() {
            done[next] = true;
            order.push(next);
            for &j in &dependents[next] {
                waiting[j] -= 1;
                if waiting[j] == 0 {
                    ready.push(Reverse(j));
                }
            }
        }
        if let Some(first) = (0..nodes.len()).find(|&i| !done[i]) {
            // Follow remaining dependencies from `first` until a node repeats.
            let mut path = vec![first];
            let mut current = first;
            while let Some((d, _)) = deps[current].iter().find(|(d, _)| !done[*d]) {
                if let Some(start) = path.iter().position(|p| p == d) {
                    path.drain(..start);
                    path.push(*d);
                    break;
                }
                path.push(*d);
                current = *d;
            }
            let names: Vec<&str> = path.iter().map(|&i| node_name(nodes[i])).collect();
            let (file, span) = match (
                nodes[path[0]],
                deps[path[0]]
                    .iter()
                    .find(|(d, _)| *d == path[1 % path.len()]),
            ) {
                (Node::Op(f, _) | Node::Repeat(f, _), Some((_, name))) => (f, name.span()),
                (Node::Op(f, o), None) => (f, o.get_ref().name.span()),
                (Node::Repeat(f, r), None) => (f, r.get_ref().name.span()),
            };
            let mut diagnostic = self
                .site(file)
                .error("dependency cycle between operations", span);
            if let [one, _] = names[..] {
                diagnostic = diagnostic.label(format!("`{one}` reads its own output"));
            }
            self.diagnostics
                .push(diagnostic.note(format!("cycle: {}", names.join(" -> "))));
            for i in (0..nodes.len()).filter(|&i| !done[i]) {
                self.poisoned.insert(node_name(nodes[i]).to_string());
            }
        }
        order
    }

    /// Resolves a tensor reference, reporting unknown names.
    fn lookup(
        &mut self,
        site: &Site,
        env: &HashMap<String, TensorId>,
        name: &Spanned<String>,
    ) -> Option<TensorId> {
        if let Some(id) = env.get(name.get_ref()) {
            return Some(*id);
        }
        if self.poisoned.contains(name.get_ref()) {
            return None;
        }
        let mut diagnostic =
            site.error(format!("unknown tensor `{}`", name.get_ref()), name.span());
        if let Some(owner) = self.body_local.get(name.get_ref()) {
            // Inside a body, the advice to read the repeat's result does
            // not apply: a body sees its own names and the outer ones.
            let advice = match self.body {
                Some(_) => "a body sees its own names and those outside every repeat",
                None => "use the repeat's name for its result",
            };
            diagnostic = diagnostic.note(format!(
                "`{}` is local to repeat `{owner}`; {advice}",
                name.get_ref()
            ));
        } else if let Some(similar) = (self.diagnostics.len() < super::limits::MAX_SUGGESTIONS)
            // Each suggestion compares the name with every other: a few
            // are help, thousands would be a long wait.
            .then(|| crate::suggest::closest(name.get_ref(), env.keys().map(String::as_str)))
            .flatten()
        {
            diagnostic =
                diagnostic.help(format!("a tensor with a similar name exists: `{similar}`"));
        }
        self.diagnostics.push(diagnostic);
        None
    }

    /// Adds one operation whose inputs resolve in `env`.
    fn op(
        &mut self,
        file: usize,
        op: &Spanned<OpAst>,
        env: &HashMap<String, TensorId>,
    ) -> Option<TensorId> {
        let site = self.site(file);
        let ast = op.get_ref();
        let name = ast.name.get_ref().clone();
        let ids: Vec<Option<TensorId>> = ast
            .inputs
            .get_ref()
            .iter()
            .map(|input| self.lookup(&site, env, input))
            .collect();
        let Some(ids) = ids.into_iter().collect::<Option<Vec<_>>>() else {
            self.poisoned.insert(name);
            return None;
        };
        let inputs: Vec<Input> = ids
            .iter()
            .zip(ast.inputs.get_ref())
            .map(|(id, input)| {
                let t = self.graph.tensor(*id);
                Input {
                    name: input,
                    shape: &t.shape,
                    dtype: t.dtype,
                    scale: t.scale,
                }
            })
            .collect();
        let inferred = shapes::infer(&site, ast, &inputs)
            .and_then(|inferred| self.gathered_inputs(&site, ast, &ids, inferred))
            .and_then(
                |inferred| match self.too_large(&inferred.shape, inferred.dtype) {
                    Some(problem) => Err(site.error(
                        format!("the result of `{name}` does not fit: {problem}"),
                        ast.name.span(),
                    )),
                    None => Ok(inferred),
                },
            );
        match inferred {
            Ok(inferred) => {
                let written = name;
                let name = self.graph_name(&written);
                self.graph.tensors.push(Tensor {
                    written_name: (name != written).then_some(written),
                    name: name.clone(),
                    shape: inferred.shape,
                    dtype: inferred.dtype,
                    scale: inferred.scale,
                    role: Role::Activation,
                    init: None,
                    repeat: None,
                });
                let output = TensorId(self.graph.tensors.len() as u32 - 1);
                self.graph.ops.push(Op {
                    name,
                    kind: inferred.kind,
                    inputs: ids,
                    output,
                });
                Some(output)
            }
            Err(diagnostic) => {
                self.diagnostics.push(diagnostic);
                self.poisoned.insert(name);
                None
            }
        }
    }

    fn repeat(&mut self, file: usize, repeat: &'a Spanned<RepeatAst>) {
        let site = self.site(file);
        let ast = repeat.get_ref();
        let name = ast.name.get_ref().clone();
        let count = *ast.count.get_ref();
        if !(1..=0xFFFF).contains(&count) {
            self.diagnostics.push(
                site.error(
                    format!("repeat count {count} is out of range"),
                    ast.count.span(),
                )
                .label("expected 1..=65535"),
            );
            self.poisoned.insert(name);
            return;
        }
        let env = self.env.clone();
        let Some(init) = self.lookup(&site, &env, &ast.input) else {
            self.poisoned.insert(name);
            return;
        };
        let index = self.graph.repeats.len() as u32;
        let entering = self.graph.tensor(init).clone();
        self.body = Some(ast.name.get_ref().as_str());
        let carry = self.graph_name(ast.carry.get_ref());
        self.graph.tensors.push(Tensor {
            written_name: (&carry != ast.carry.get_ref()).then(|| ast.carry.get_ref().clone()),
            name: carry,
            role: Role::Activation,
            init: None,
            repeat: None,
            ..entering.clone()
        });
        let carry_in = TensorId(self.graph.tensors.len() as u32 - 1);
        let mut body_env = env;
        body_env.insert(ast.carry.get_ref().clone(), carry_in);
        for t in &ast.tensor {
            if let Some(id) = self.tensor(file, t, Some(index)) {
                body_env.insert(t.get_ref().name.get_ref().clone(), id);
            }
        }
        let body_nodes: Vec<Node<'a>> = ast.op.iter().map(|o| Node::Op(file, o)).collect();
        let names = first_index(body_nodes.iter().map(|n| node_name(*n)));
        let deps: Vec<Vec<(usize, &Spanned<String>)>> = body_nodes
            .iter()
            .map(|n| {
                node_inputs(*n)
                    .into_iter()
                    .filter_map(|i| names.get(i.get_ref().as_str()).map(|&p| (p, i)))
                    .collect()
            })
            .collect();
        let first_op = self.graph.ops.len() as u32;
        let mut failed = false;
        for i in self.topological(&body_nodes, &deps) {
            let Node::Op(_, op) = body_nodes[i] else {
                continue;
            };
            let scope = std::mem::take(&mut body_env);
            let id = self.op(file, op, &scope);
            body_env = scope;
            match id {
                Some(id) => {
                    body_env.insert(op.get_ref().name.get_ref().clone(), id);
                }
                None => failed = true,
            }
        }
        self.body = None;
        if failed || self.graph.ops.len() as u32 - first_op != ast.op.len() as u32 {
            self.poisoned.insert(name);
            return;
        }
        if ast.op.is_empty() {
            self.diagnostics
                .push(site.error("a repeat needs at least one op", repeat.span()));
            self.poisoned.insert(name);
            return;
        }
        let result_is_body_op = ast
            .op
            .iter()
            .any(|o| o.get_ref().name.get_ref() == ast.result.get_ref());
        let Some(carry_out) = body_env
            .get(ast.result.get_ref())
            .copied()
            .filter(|_| result_is_body_op)
        else {
            self.diagnostics.push(site.error(
                format!(
                    "`result = \"{}\"` must name an op of the repeat body",
                    ast.result.get_ref()
                ),
                ast.result.span(),
            ));
            self.poisoned.insert(name);
            return;
        };
        let out = self.graph.tensor(carry_out).clone();
        if out.shape != entering.shape || out.dtype != entering.dtype || out.scale != entering.scale
        {
            self.diagnostics.push(site.error(
                format!(
                    "the repeat's result must match its carry: `{}` is {} but `{}` enters as {}",
                    ast.result.get_ref(),
                    typed(&out),
                    ast.carry.get_ref(),
                    typed(&entering),
                ),
                key_span(&self.files[file].text, &ast.result),
            ));
            self.poisoned.insert(name);
            return;
        }
        self.graph.tensors.push(Tensor {
            name: name.clone(),
            role: Role::Activation,
            init: None,
            repeat: None,
            written_name: None,
            ..entering
        });
        let output = TensorId(self.graph.tensors.len() as u32 - 1);
        self.graph.repeats.push(Repeat {
            name: name.clone(),
            count: count as u32,
            init,
            carry_in,
            carry_out,
            output,
            body: (first_op..self.graph.ops.len() as u32).map(OpId).collect(),
        });
        self.env.insert(name, output);
    }

    fn check(&mut self) {
        let root = self.root();
        let site = self.site(root);
        let Some(check) = &self.files[root].ast.check else {
            if self.files[root].ast.project.is_some() {
                self.diagnostics.push(
                    site.error("missing [check] table", 0..0)
                        .help("add [check] with reference_precision, min_cosine_similarity, max_abs_error and outputs"),
                );
            }
            return;
        };
        let c = check.get_ref();
        match c.reference_precision.get_ref().as_str() {
            "device" => self.graph.check.reference_precision = ReferencePrecision::Device,
            "f32" => self.graph.check.reference_precision = ReferencePrecision::F32,
            other => self.diagnostics.push(
                suggest(
                    site.error(
                        format!("unknown reference precision `{other}`"),
                        c.reference_precision.span(),
                    ),
                    other,
                    &["device", "f32"],
                )
                .help("use \"device\" or \"f32\""),
            ),
        }
        let cos = *c.min_cosine_similarity.get_ref();
        if !(-1.0..=1.0).contains(&cos) {
            self.diagnostics.push(site.error(
                "`min_cosine_similarity` must be between -1 and 1",
                c.min_cosine_similarity.span(),
            ));
        }
        self.graph.check.min_cosine_similarity = cos;
        let abs = *c.max_abs_error.get_ref();
        if !(abs.is_finite() && abs >= 0.0) {
            self.diagnostics.push(site.error(
                "`max_abs_error` must be a finite number, not negative",
                c.max_abs_error.span(),
            ));
        }
        self.graph.check.max_abs_error = abs;
        if c.outputs.get_ref().is_empty() {
            self.diagnostics
                .push(site.error("[check] needs at least one output", c.outputs.span()));
        }
        let env = self.env.clone();
        let mut resolved = 0;
        let mut refused = 0;
        for output in c.outputs.get_ref() {
            if let Some(id) = self.lookup(&site, &env, output) {
                resolved += 1;
                // An input or a weight is not computed, so there is nothing
                // to check; it is left out (a located warning says so, see
                // `lints`).
                if self.graph.tensor(id).role != Role::Activation {
                    continue;
                }
                if let Some(sliced) = self.sliced_view(id) {
                    self.diagnostics.push(
                        site.error(
                            format!(
                                "`{}` views part of `{sliced}` through a slice, which the device never holds on its own",
                                output.get_ref()
                            ),
                            output.span(),
                        )
                        .help(format!("check `{sliced}`, or an op that reads the slice")),
                    );
                    refused += 1;
                    continue;
                }
                if self.graph.check.outputs.contains(&id) {
                    self.diagnostics.push(site.error(
                        format!("`{}` is listed twice", output.get_ref()),
                        output.span(),
                    ));
                } else {
                    self.graph.check.outputs.push(id);
                }
            }
        }
        // Outputs refused above already have their own error.
        if resolved > refused && self.graph.check.outputs.is_empty() {
            self.diagnostics.push(
                site.error(
                    "none of the `[check] outputs` is computed by the program",
                    c.outputs.span(),
                )
                .label("inputs and weights only")
                .help("check the output of an op"),
            );
        }
        self.graph.outputs = self.graph.check.outputs.clone();
    }

    /// A `concat` copies its inputs by exchange from fixed buffers, so an
    /// input that is (a view of) a repeat's per-iteration weight, held in a
    /// different buffer each iteration, is an error at that input.
    fn gathered_inputs(
        &self,
        site: &Site,
        ast: &OpAst,
        ids: &[TensorId],
        inferred: shapes::Inferred,
    ) -> Result<shapes::Inferred, Diagnostic> {
        if !matches!(inferred.kind, OpKind::Concat { .. }) {
            return Ok(inferred);
        }
        for (&id, name) in ids.iter().zip(ast.inputs.get_ref()) {
            let base = self.graph.view_base(id);
            if self.graph.tensor(base).repeat.is_some() {
                return Err(site
                    .error(
                        format!(
                            "`concat` cannot read `{}`, a weight with one instance per iteration",
                            name.get_ref()
                        ),
                        name.span(),
                    )
                    .note("a concat copies from the same buffers every iteration")
                    .help("apply an operation to the weight first (a `cast`, or a `mul` by one)"));
            }
        }
        Ok(inferred)
    }

    /// The tensor a slice cuts, when `id` is a chain of views containing a
    /// slice. The host reads a checked view through the inverse of its
    /// chain from the buffers under it, and a slice has no inverse (most of
    /// the tensor under it is not part of it).
    fn sliced_view(&self, id: TensorId) -> Option<String> {
        let mut current = id;
        while let Some(op) = self.graph.ops.iter().find(|op| op.output == current) {
            match op.kind {
                OpKind::Slice { .. } => {
                    return Some(self.graph.tensor(op.inputs[0]).name.clone());
                }
                OpKind::Transpose { .. } | OpKind::Reshape => current = op.inputs[0],
                _ => return None,
            }
        }
        None
    }
}

/// A tensor's type as diagnostics print it: `f143[8, 7]*2^-4` (the scale
/// only for FP8).
fn typed(tensor: &Tensor) -> String {
    let mut text = format!("{}{:?}", tensor.dtype, tensor.shape);
    if tensor.dtype.is_fp8() {
        text.push_str(&format!("*2^{}", tensor.scale));
    }
    text
}

impl Validator<'_> {
    /// The tiles the project may use (all of the target's when `tiles` is
    /// itself wrong) and the bytes they hold.
    fn capacity(&self) -> (u32, u64) {
        let target = self.graph.target.spec();
        let tiles = match self.graph.tiles {
            0 => target.tiles,
            tiles => tiles,
        };
        (tiles, super::limits::capacity(target, tiles))
    }

    /// Why a tensor cannot fit the project's tiles, if it cannot: refused
    /// here, before any phase allocates per element.
    fn too_large(&self, shape: &[usize], dtype: DType) -> Option<String> {
        let (tiles, capacity) = self.capacity();
        super::limits::tensor_problem(shape, dtype, capacity, tiles)
    }

    /// Inputs and weights (a repeat's once per iteration) stay in tile
    /// memory for the whole run: together they must fit, or the project is
    /// refused before planning and placement would find out the slow way.
    fn resident(&mut self) {
        let (total, parts) = super::limits::resident_bytes(&self.graph);
        let (tiles, capacity) = self.capacity();
        if total <= capacity {
            return;
        }
        let root = self.root();
        let Some(project) = &self.files[root].ast.project else {
            return;
        };
        let largest: Vec<String> = parts
            .iter()
            .take(3)
            .map(|(name, bytes)| format!("{name} {bytes} bytes"))
            .collect();
        let span = key_span(&self.files[root].text, &project.get_ref().tiles);
        let target = self.graph.target.spec();
        let per_tile = super::limits::capacity(target, 1);
        let needed = total.div_ceil(per_tile.max(1));
        let help = if needed <= u64::from(target.tiles) {
            format!("each tile holds {per_tile} bytes: use at least {needed} tiles")
        } else {
            format!(
                "that is more than all {} tiles of {} hold",
                target.tiles, target.name
            )
        };
        self.diagnostics.push(
            self.site(root)
                .error(
                    format!(
                        "the project's inputs and weights need {total} bytes, more than the {capacity} bytes of memory of its {tiles} tiles"
                    ),
                    span,
                )
                .note(format!("the largest: {}", largest.join(", ")))
                .help(help),
        );
    }
}

/// Each name's first position, for looking dependencies up by name.
fn first_index<'n>(names: impl Iterator<Item = &'n str>) -> HashMap<&'n str, usize> {
    let mut index = HashMap::new();
    for (i, name) in names.enumerate() {
        index.entry(name).or_insert(i);
    }
    index
}

fn node_name(node: Node<'_>) -> &str {
    match node {
        Node::Op(_, o) => o.get_ref().name.get_ref(),
        Node::Repeat(_, r) => r.get_ref().name.get_ref(),
    }
}

/// The names a node reads from outside itself.
fn node_inputs(node: Node<'_>) -> Vec<&Spanned<String>> {
    match node {
        Node::Op(_, o) => o.get_ref().inputs.get_ref().iter().collect(),
        Node::Repeat(_, r) => {
            let r = r.get_ref();
            let local: HashSet<&str> = std::iter::once(r.carry.get_ref().as_str())
                .chain(r.tensor.iter().map(|t| t.get_ref().name.get_ref().as_str()))
                .chain(r.op.iter().map(|o| o.get_ref().name.get_ref().as_str()))
                .collect();
            std::iter::once(&r.input)
                .chain(
                    r.op.iter()
                        .flat_map(|o| o.get_ref().inputs.get_ref().iter())
                        .filter(|i| !local.contains(i.get_ref().as_str())),
                )
                .collect()
        }
    }
}
