//! The project format's keys as data: for completion in the language
//! server and for the JSON Schema `ipub schema` prints (which TOML editors,
//! taplo and Even Better TOML, use to complete and validate keys without
//! the server).
//!
//! [`syntax`](super::syntax) is what the parser accepts; a test holds this
//! table to it key by key, so the two cannot drift apart.

use serde_json::{json, Map, Value};

/// What a key's value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ValueKind {
    String,
    Integer,
    Number,
    Boolean,
    Strings,
    Integers,
    /// The inline `init` table.
    Init,
}

/// One key of a table.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Key {
    pub name: &'static str,
    pub kind: ValueKind,
    pub required: bool,
    /// The allowed values of a string key, when they are a fixed set.
    pub values: &'static [&'static str],
    pub doc: &'static str,
}

/// One table of the format.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Table {
    /// As written in a header: `project`, `tensor`, `repeat.op`.
    pub header: &'static str,
    /// `[[header]]` (an array of tables) rather than `[header]`.
    pub array: bool,
    pub keys: &'static [Key],
    pub doc: &'static str,
}

impl Table {
    /// The header as written: `[project]` or `[[tensor]]`.
    pub(crate) fn written(&self) -> std::string::String {
        if self.array {
            format!("[[{}]]", self.header)
        } else {
            format!("[{}]", self.header)
        }
    }
}

const fn key(
    name: &'static str,
    kind: ValueKind,
    required: bool,
    values: &'static [&'static str],
    doc: &'static str,
) -> Key {
    Key {
        name,
        kind,
        required,
        values,
        doc,
    }
}

use ValueKind::*;

pub(super) const DTYPES: &[&str] = &["f32", "f16", "f143", "f152"];

/// Keys outside any table.
pub(crate) const ROOT_KEYS: &[Key] = &[key(
    "include",
    Strings,
    false,
    &[],
    "Files whose tensors, ops and repeats join the project, relative to this file.",
)];

const TENSOR_KEYS: &[Key] = &[
    key(
        "name",
        String,
        true,
        &[],
        "Unique across the project and its includes.",
    ),
    key(
        "shape",
        Integers,
        true,
        &[],
        "Positive dimensions, at least one.",
    ),
    key("dtype", String, true, DTYPES, "Element type."),
    key(
        "scale",
        Integer,
        false,
        &[],
        "FP8 only: the stored value times 2^scale is the real value (-32..=31).",
    ),
    key(
        "role",
        String,
        true,
        &["input", "weight"],
        "`input` is streamed from the host at each run; `weight` is loaded with the package.",
    ),
    key(
        "init",
        Init,
        false,
        &[],
        "Seeded initialisation; default `{ dist = \"normal\", std = 1.0 }`.",
    ),
];

const OP_KEYS: &[Key] = &[
    key(
        "name",
        String,
        true,
        &[],
        "The op's name, also the name of the tensor it produces.",
    ),
    key(
        "op",
        String,
        true,
        super::shapes::OP_NAMES,
        "What the op computes.",
    ),
    key(
        "inputs",
        Strings,
        true,
        &[],
        "The tensors it reads (softmax: its input and, optionally, an additive mask).",
    ),
    key(
        "dtype",
        String,
        false,
        DTYPES,
        "The output's element type (required for cast, not for views).",
    ),
    key(
        "scale",
        Number,
        false,
        &[],
        "A cast's FP8 output scale, or softmax's multiplier.",
    ),
    key(
        "transpose_rhs",
        Boolean,
        false,
        &[],
        "matmul: the right operand is [.., N, K].",
    ),
    key(
        "causal",
        Boolean,
        false,
        &[],
        "softmax: mask out [.., i, j] for j > i.",
    ),
    key(
        "epsilon",
        Number,
        false,
        &[],
        "layernorm: added to the variance (default 1e-5).",
    ),
    key(
        "perm",
        Integers,
        false,
        &[],
        "transpose: the axis permutation.",
    ),
    key(
        "shape",
        Integers,
        false,
        &[],
        "reshape: the new shape (one entry may be -1).",
    ),
    key(
        "block",
        Integers,
        false,
        &[],
        "rearrange: the block [rows, columns].",
    ),
    key(
        "axis",
        Integer,
        false,
        &[],
        "slice: the axis cut; concat: the axis joined (negative counts from the last).",
    ),
    key(
        "start",
        Integer,
        false,
        &[],
        "slice: the first index kept along `axis`.",
    ),
    key(
        "end",
        Integer,
        false,
        &[],
        "slice: one past the last index kept along `axis`.",
    ),
];

/// Every table, in the order the format chapter describes them.
pub(crate) const TABLES: &[Table] = &[
    Table {
        header: "project",
        array: false,
        doc: "The project: name, target and tiles (root file only).",
        keys: &[
            key(
                "name",
                String,
                true,
                &[],
                "The project's name; package and profile names derive from it.",
            ),
            key("target", String, true, &["ipu21"], "The target machine."),
            key(
                "tiles",
                Integer,
                true,
                &[],
                "How many of the target's tiles the planner may use (1..=1472).",
            ),
            key(
                "seed",
                Integer,
                false,
                &[],
                "The generator seed for inputs and weights (default 0).",
            ),
            key(
                "kernels",
                String,
                false,
                &[],
                "The directory of kernel sources, relative to this file (default \"../device\").",
            ),
        ],
    },
    Table {
        header: "tensor",
        array: true,
        doc: "An input or a weight.",
        keys: TENSOR_KEYS,
    },
    Table {
        header: "op",
        array: true,
        doc: "An operation.",
        keys: OP_KEYS,
    },
    Table {
        header: "repeat",
        array: true,
        doc: "A body of ops run `count` times, compiled once and looped.",
        keys: &[
            key(
                "name",
                String,
                true,
                &[],
                "The tensor that receives the last iteration's result.",
            ),
            key("count", Integer, true, &[], "Iterations (1..=65535)."),
            key(
                "input",
                String,
                true,
                &[],
                "The tensor entering the first iteration.",
            ),
            key(
                "carry",
                String,
                true,
                &[],
                "The body's name for the activation entering each iteration.",
            ),
            key(
                "result",
                String,
                true,
                &[],
                "The body op whose output becomes the next carry.",
            ),
        ],
    },
    Table {
        header: "repeat.tensor",
        array: true,
        doc: "A per-iteration weight of the enclosing repeat.",
        keys: TENSOR_KEYS,
    },
    Table {
        header: "repeat.op",
        array: true,
        doc: "An op of the enclosing repeat's body.",
        keys: OP_KEYS,
    },
    Table {
        header: "check",
        array: false,
        doc: "How the outputs are checked against the host reference (root file only).",
        keys: &[
            key(
                "reference_precision",
                String,
                true,
                &["device", "f32"],
                "`device` emulates the device's rounding; `f32` does not.",
            ),
            key(
                "min_cosine_similarity",
                Number,
                true,
                &[],
                "Per checked output, in [-1, 1].",
            ),
            key(
                "max_abs_error",
                Number,
                true,
                &[],
                "Per value; a value differing by more is a mismatch.",
            ),
            key(
                "outputs",
                Strings,
                true,
                &[],
                "The tensors read back and compared.",
            ),
        ],
    },
];

/// The keys of `init`.
pub(crate) const INIT_KEYS: &[Key] = &[
    key(
        "dist",
        String,
        false,
        &["normal", "uniform", "zeros", "ones"],
        "The distribution (or `file`).",
    ),
    key("std", Number, false, &[], "normal: the standard deviation."),
    key(
        "scale",
        Number,
        false,
        &[],
        "uniform: values are in [-scale, scale).",
    ),
    key(
        "file",
        String,
        false,
        &[],
        "A tensor file (`.safetensors` or `.npy`), relative to this file, instead of `dist`.",
    ),
    key(
        "key",
        String,
        false,
        &[],
        "The entry of a `.safetensors` file; `{i}` stands for a repeat's iteration.",
    ),
];

/// The table a header names (`tensor`, `repeat.op`).
pub(crate) fn table(header: &str) -> Option<&'static Table> {
    TABLES.iter().find(|t| t.header == header)
}

fn value_schema(key: &Key) -> Value {
    let mut schema = match key.kind {
        String => json!({ "type": "string" }),
        Integer => json!({ "type": "integer" }),
        Number => json!({ "type": "number" }),
        Boolean => json!({ "type": "boolean" }),
        Strings => json!({ "type": "array", "items": { "type": "string" } }),
        Integers => json!({ "type": "array", "items": { "type": "integer" } }),
        Init => object_schema(INIT_KEYS, "Seeded initialisation."),
    };
    if !key.values.is_empty() {
        schema["enum"] = json!(key.values);
    }
    schema["description"] = json!(key.doc);
    schema
}

fn object_schema(keys: &[Key], doc: &str) -> Value {
    let properties: Map<std::string::String, Value> = keys
        .iter()
        .map(|k| (k.name.to_string(), value_schema(k)))
        .collect();
    let required: Vec<&str> = keys.iter().filter(|k| k.required).map(|k| k.name).collect();
    json!({
        "type": "object",
        "description": doc,
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

fn table_schema(table: &Table, nested: &[(&str, Value)]) -> Value {
    let mut schema = object_schema(table.keys, table.doc);
    for (name, value) in nested {
        schema["properties"][*name] = value.clone();
    }
    if table.array {
        json!({ "type": "array", "description": table.doc, "items": schema })
    } else {
        schema
    }
}

/// The JSON Schema (draft 07) of a project file. Every key of an included
/// file is optional at the top level, since included files have no
/// `[project]` or `[check]`.
pub(crate) fn json_schema() -> Value {
    let get = |header: &str| table(header).expect("a table of the format");
    let repeat = table_schema(
        get("repeat"),
        &[
            ("tensor", table_schema(get("repeat.tensor"), &[])),
            ("op", table_schema(get("repeat.op"), &[])),
        ],
    );
    let mut root = object_schema(
        ROOT_KEYS,
        "An ipub project (see the project format chapter of the ipub book).",
    );
    for (name, value) in [
        ("project", table_schema(get("project"), &[])),
        ("tensor", table_schema(get("tensor"), &[])),
        ("op", table_schema(get("op"), &[])),
        ("repeat", repeat),
        ("check", table_schema(get("check"), &[])),
    ] {
        root["properties"][name] = value;
    }
    root["$schema"] = json!("http://json-schema.org/draft-07/schema#");
    root["$id"] = json!("https://ipub.invalid/schemas/project-v1.json");
    root["title"] = json!("ipub project");
    root
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys serde expects in a table, from its unknown-field error.
    fn accepted_keys(toml_text: &str) -> Vec<std::string::String> {
        let error = toml::from_str::<super::super::syntax::FileAst>(toml_text)
            .expect_err("the bogus key is rejected");
        let message = error.message().to_string();
        let (_, expected) = message.split_once("expected").expect("a list of keys");
        expected
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect()
    }

    fn keys(keys: &[Key]) -> Vec<std::string::String> {
        keys.iter().map(|k| k.name.to_string()).collect()
    }

    #[test]
    fn every_table_lists_exactly_the_keys_the_parser_accepts() {
        let cases = [
            ("project", "[project]\nbogus = 1\n"),
            ("tensor", "[[tensor]]\nbogus = 1\n"),
            ("op", "[[op]]\nbogus = 1\n"),
            ("repeat", "[[repeat]]\nbogus = 1\n"),
            (
                "repeat.tensor",
                "[[repeat]]\n[[repeat.tensor]]\nbogus = 1\n",
            ),
            ("repeat.op", "[[repeat]]\n[[repeat.op]]\nbogus = 1\n"),
            ("check", "[check]\nbogus = 1\n"),
        ];
        for (header, text) in cases {
            let mut accepted = accepted_keys(text);
            // A repeat's body tables are keys of the repeat to serde.
            accepted.retain(|k| !(header == "repeat" && (k == "tensor" || k == "op")));
            assert_eq!(
                keys(table(header).expect("table").keys),
                accepted,
                "{header}"
            );
        }
        let mut root = accepted_keys("bogus = 1\n");
        root.retain(|k| !TABLES.iter().any(|t| t.header == k));
        assert_eq!(keys(ROOT_KEYS), root);
        assert_eq!(
            keys(INIT_KEYS),
            accepted_keys("[[tensor]]\ninit = { bogus = 1 }\n")
        );
    }

    #[test]
    fn the_schema_describes_nested_tables_and_enums() {
        let schema = json_schema();
        let op = &schema["properties"]["repeat"]["items"]["properties"]["op"]["items"];
        assert_eq!(op["additionalProperties"], json!(false));
        assert_eq!(op["properties"]["op"]["enum"][0], json!("matmul"));
        assert_eq!(
            schema["properties"]["check"]["required"],
            json!([
                "reference_precision",
                "min_cosine_similarity",
                "max_abs_error",
                "outputs"
            ])
        );
    }
}
