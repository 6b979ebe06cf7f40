//! The fusion pass on small projects: what fuses, what does not and why,
//! through one `check` helper that dumps the fusion and the fused graph's
//! operations.

use super::*;
use crate::db::{Database, Db};
use crate::vfs::MemoryFs;
use camino::Utf8Path;
use expect_test::{expect, Expect};
use std::sync::Arc;

fn legalized(text: &str) -> Graph {
    let fs = MemoryFs::new();
    fs.write("p.toml", text);
    let db = Database::new(Arc::new(fs));
    let file = db.file(Utf8Path::new("p.toml"));
    let result = crate::project::project_graph(&db, file);
    let Some(graph) = result.graph.clone() else {
        panic!("invalid project: {:?}", result.diagnostics);
    };
    crate::legalize::legalize(&graph).0
}

/// Fuses the project and compares the dump, the fused graph's operations
/// (with their inputs and output) and the repeat bodies with `expected`.
fn check(text: &str, expected: Expect) {
    let graph = legalized(text);
    let fusion = fuse(&graph);
    let mut out = fusion.dump();
    for op in &fusion.graph.ops {
        let inputs: Vec<&str> = op
            .inputs
            .iter()
            .map(|&t| fusion.graph.tensor(t).name.as_str())
            .collect();
        let _ = writeln!(
            out,
            "  {} = {}({}) -> {}",
            op.name,
            op.kind.name(),
            inputs.join(", "),
            fusion.graph.tensor(op.output).name
        );
    }
    for repeat in &fusion.graph.repeats {
        let _ = writeln!(out, "  repeat {} body {:?}", repeat.name, repeat.body);
    }
    expected.assert_eq(&out);
    // The fused graph has nothing more to fuse, and the tensors are those
    // of the legalized graph, ids unchanged, and the FP8 results of views
    // a cast moved before after them.
    assert!(fuse(&fusion.graph).fused.is_empty());
    // Every operation reads only tensors made before it (or by none).
    let mut made = vec![false; fusion.graph.tensors.len()];
    for op in &fusion.graph.ops {
        for &t in &op.inputs {
            let produced = fusion.graph.ops.iter().any(|o| o.output == t);
            assert!(!produced || made[t.0 as usize], "{} reads ahead", op.name);
        }
        made[op.output.0 as usize] = true;
    }
    assert_eq!(
        fusion.graph.tensors[..graph.tensors.len()],
        graph.tensors[..]
    );
}

const HEAD: &str = r#"
[project]
name = "fuse"
target = "ipu21"
tiles = 8
seed = 1

[[tensor]]
name = "x"
shape = [16, 32]
dtype = "f16"
role = "input"

[[tensor]]
name = "g"
shape = [32]
dtype = "f16"
role = "weight"

[[tensor]]
name = "b"
shape = [32]
dtype = "f16"
role = "weight"
"#;

const CHECK_Y: &str = r#"
[check]
reference_precision = "device"
min_cosine_similarity = 0.99
max_abs_error = 0.1
outputs = ["y"]
"#;

#[test]
fn producers_fold_the_cast_to_fp8_that_follows_them() {
    let ops = r#"
[[op]]
name = "ln"
op = "layernorm"
inputs = ["x", "g", "b"]
dtype = "f16"

[[op]]
name = "ln_f8"
op = "cast"
inputs = ["ln"]
dtype = "f143"
scale = -2

[[op]]
name = "back"
op = "cast"
inputs = ["ln_f8"]
dtype = "f16"

[[op]]
name = "s"
op = "add"
inputs = ["back", "b"]
dtype = "f16"

[[op]]
name = "s_f8"
op = "cast"
inputs = ["s"]
dtype = "f152"

[[op]]
name = "y"
op = "cast"
inputs = ["s_f8"]
dtype = "f16"
"#;
    check(
        &format!("{HEAD}{ops}{CHECK_Y}"),
        expect![[r#"
            ln+ln_f8: layernorm -> cast, ln[16, 32] not materialised, writes f143[16, 32]*2^-2
            s+s_f8: add -> cast, s[16, 32] not materialised, writes f152[16, 32]*2^0
            2 fused operations, 4 operations left
              ln+ln_f8 = layernorm(x, g, b) -> ln_f8
              back = cast(ln_f8) -> back
              s+s_f8 = add(back, b) -> s_f8
              y = cast(s_f8) -> y
        "#]],
    );
}

/// A cast to FP8 after a transpose and a reshape moves before them and
/// folds into the layernorm that makes their input: the views carry FP8
/// and the f16 ones are no longer produced. A cast after views of an
/// input, or after a view that is read twice, stays where it is.
#[test]
fn a_cast_reached_through_views_moves_before_them_and_folds() {
    let ops = r#"
[[op]]
name = "ln"
op = "layernorm"
inputs = ["x", "g", "b"]
dtype = "f16"

[[op]]
name = "t"
op = "transpose"
inputs = ["ln"]
perm = [1, 0]

[[op]]
name = "s"
op = "add"
inputs = ["x", "x"]
dtype = "f16"

[[op]]
name = "r"
op = "reshape"
inputs = ["t"]
shape = [8, 64]

[[op]]
name = "st"
op = "transpose"
inputs = ["s"]
perm = [1, 0]

[[op]]
name = "r_f8"
op = "cast"
inputs = ["r"]
dtype = "f143"
scale = -1

[[op]]
name = "y"
op = "cast"
inputs = ["r_f8"]
dtype = "f16"

[[op]]
name = "xt"
op = "transpose"
inputs = ["x"]
perm = [1, 0]

[[op]]
name = "xt_f8"
op = "cast"
inputs = ["xt"]
dtype = "f143"

[[op]]
name = "st_f8"
op = "cast"
inputs = ["st"]
dtype = "f143"

[[op]]
name = "st2"
op = "add"
inputs = ["st", "st"]
dtype = "f16"

[check]
reference_precision = "device"
min_cosine_similarity = 0.99
max_abs_error = 0.1
outputs = ["y", "xt_f8", "st_f8", "st2"]
"#;
    check(
        &format!("{HEAD}{ops}"),
        expect![[r#"
            ln+r_f8: layernorm -> cast, ln[16, 32], t[32, 16], r[8, 64] not materialised, writes f143[16, 32]*2^-1
            1 fused operations, 10 operations left
              ln+r_f8 = layernorm(x, g, b) -> ln+r_f8
              s = add(x, x) -> s
              t = transpose(ln+r_f8) -> t+r_f8
              st = transpose(s) -> st
              r = reshape(t+r_f8) -> r_f8
              y = cast(r_f8) -> y
              xt = transpose(x) -> xt
              xt_f8 = cast(xt) -> xt_f8
              st_f8 = cast(st) -> st_f8
              st2 = add(st, st) -> st2
        "#]],
    );
}

/// A matrix product's f16 result folds its cast whatever the product's
/// input types (FP8 here, and f16 after the first cast); a matmul read
/// twice keeps its cast apart.
#[test]
fn a_matrix_product_folds_its_cast_to_fp8() {
    let ops = r#"
[[tensor]]
name = "w"
shape = [32, 32]
dtype = "f143"
scale = -4
role = "weight"

[[op]]
name = "x8"
op = "cast"
inputs = ["x"]
dtype = "f143"

[[op]]
name = "p"
op = "matmul"
inputs = ["x8", "w"]
dtype = "f16"

[[op]]
name = "p_f8"
op = "cast"
inputs = ["p"]
dtype = "f143"
scale = -1

[[op]]
name = "p16"
op = "cast"
inputs = ["p_f8"]
dtype = "f16"

[[op]]
name = "r"
op = "matmul"
inputs = ["p16", "x"]
dtype = "f16"
transpose_rhs = true

[[op]]
name = "r_f8"
op = "cast"
inputs = ["r"]
dtype = "f152"

[[op]]
name = "twice"
op = "matmul"
inputs = ["x", "b16"]
dtype = "f16"

[[op]]
name = "twice_f8"
op = "cast"
inputs = ["twice"]
dtype = "f143"

[[op]]
name = "y"
op = "add"
inputs = ["twice", "twice"]
dtype = "f16"

[[tensor]]
name = "b16"
shape = [32, 16]
dtype = "f16"
role = "weight"

[check]
reference_precision = "device"
min_cosine_similarity = 0.99
max_abs_error = 0.1
outputs = ["r_f8", "twice_f8", "y"]
"#;
    check(
        &format!("{HEAD}{ops}"),
        expect![[r#"
            p+p_f8: matmul -> cast, p[16, 32] not materialised, writes f143[16, 32]*2^-1
            r+r_f8: matmul -> cast, r[16, 16] not materialised, writes f152[16, 16]*2^0
            2 fused operations, 7 operations left
              x8 = cast(x) -> x8
              p+p_f8 = matmul(x8, w) -> p_f8
              p16 = cast(p_f8) -> p16
              r+r_f8 = matmul(p16, x) -> r_f8
              twice = matmul(x, b16) -> twice
              twice_f8 = cast(twice) -> twice_f8
              y = add(twice, twice) -> y
        "#]],
    );
}

#[test]
fn a_second_reader_an_output_or_another_scope_keeps_the_cast_apart() {
    let ops = r#"
[[op]]
name = "a"
op = "gelu"
inputs = ["x"]
dtype = "f16"

[[op]]
name = "a_f8"
op = "cast"
inputs = ["a"]
dtype = "f143"

[[op]]
name = "a_again"
op = "add"
inputs = ["a", "x"]
dtype = "f16"

[[op]]
name = "c"
op = "gelu"
inputs = ["x"]
dtype = "f16"

[[op]]
name = "c_f8"
op = "cast"
inputs = ["c"]
dtype = "f143"

[[op]]
name = "d"
op = "gelu"
inputs = ["x"]
dtype = "f16"

[[op]]
name = "d_f32"
op = "cast"
inputs = ["d"]
dtype = "f32"

[[op]]
name = "e"
op = "gelu"
inputs = ["x"]
dtype = "f16"

[[repeat]]
name = "looped"
count = 2
input = "a_again"
carry = "h"
result = "h2"

[[repeat.op]]
name = "e_f8"
op = "cast"
inputs = ["e"]
dtype = "f143"

[[repeat.op]]
name = "e_back"
op = "cast"
inputs = ["e_f8"]
dtype = "f16"

[[repeat.op]]
name = "h2"
op = "add"
inputs = ["h", "e_back"]
dtype = "f16"

[[op]]
name = "y"
op = "add"
inputs = ["looped", "x"]
dtype = "f16"

[check]
reference_precision = "device"
min_cosine_similarity = 0.99
max_abs_error = 0.1
outputs = ["y", "a_f8", "c", "c_f8", "d_f32"]
"#;
    // `a` has a second reader, `c` is read back by the host, `d`'s cast is
    // not to FP8, and `e` is computed once outside the repeat whose body
    // casts it at every iteration; nothing fuses.
    check(
        &format!("{HEAD}{ops}"),
        expect![[r#"
            0 fused operations, 12 operations left
              a = gelu(x) -> a
              a_f8 = cast(a) -> a_f8
              a_again = add(a, x) -> a_again
              c = gelu(x) -> c
              c_f8 = cast(c) -> c_f8
              d = gelu(x) -> d
              d_f32 = cast(d) -> d_f32
              e = gelu(x) -> e
              e_f8 = cast(e) -> e_f8
              e_back = cast(e_f8) -> e_back
              h2 = add(h, e_back) -> h2
              y = add(looped, x) -> y
              repeat looped body [OpId(8), OpId(9), OpId(10)]
        "#]],
    );
}

#[test]
fn a_pair_inside_a_repeat_fuses_there_and_the_body_is_renumbered() {
    let ops = r#"
[[repeat]]
name = "looped"
count = 3
input = "x"
carry = "h"
result = "h2"

[[repeat.op]]
name = "p"
op = "softmax"
inputs = ["h"]
scale = 0.5
dtype = "f16"

[[repeat.op]]
name = "p_f8"
op = "cast"
inputs = ["p"]
dtype = "f143"
scale = -7

[[repeat.op]]
name = "h2"
op = "cast"
inputs = ["p_f8"]
dtype = "f16"

[[op]]
name = "y"
op = "gelu"
inputs = ["looped"]
dtype = "f16"
"#;
    check(
        &format!("{HEAD}{ops}{CHECK_Y}"),
        expect![[r#"
            p+p_f8: softmax -> cast, p[16, 32] not materialised, writes f143[16, 32]*2^-7
            1 fused operations, 3 operations left
              p+p_f8 = softmax(h) -> p_f8
              h2 = cast(p_f8) -> h2
              y = gelu(looped) -> y
              repeat looped body [OpId(0), OpId(1)]
        "#]],
    );
}

/// An add of f16 operands folds into the GELU that reads it, and the chain
/// then folds the GELU's cast: one operation with the add's inputs and the
/// cast's result. An add read twice stays apart, and so does a GELU of a
/// cast (from an f32 add).
#[test]
fn an_add_folds_into_the_gelu_that_follows_it_and_chains_with_its_cast() {
    let ops = r#"
[[tensor]]
name = "w"
shape = [16, 32]
dtype = "f32"
role = "input"

[[op]]
name = "biased"
op = "add"
inputs = ["x", "b"]
dtype = "f16"

[[op]]
name = "act"
op = "gelu"
inputs = ["biased"]
dtype = "f16"

[[op]]
name = "act_f8"
op = "cast"
inputs = ["act"]
dtype = "f143"
scale = -1

[[op]]
name = "back"
op = "cast"
inputs = ["act_f8"]
dtype = "f16"

[[op]]
name = "twice"
op = "add"
inputs = ["back", "b"]
dtype = "f16"

[[op]]
name = "act2"
op = "gelu"
inputs = ["twice"]
dtype = "f16"

[[op]]
name = "wide"
op = "add"
inputs = ["w", "w"]
dtype = "f32"

[[op]]
name = "narrow"
op = "cast"
inputs = ["wide"]
dtype = "f16"

[[op]]
name = "act3"
op = "gelu"
inputs = ["narrow"]
dtype = "f16"

[[op]]
name = "both"
op = "add"
inputs = ["act2", "twice"]
dtype = "f16"

[[op]]
name = "y"
op = "add"
inputs = ["both", "act3"]
dtype = "f16"
"#;
    check(
        &format!("{HEAD}{ops}{CHECK_Y}"),
        expect![[r#"
            biased+act+act_f8: add -> gelu -> cast, biased[16, 32], act[16, 32] not materialised, writes f143[16, 32]*2^-1
            1 fused operations, 9 operations left
              biased+act+act_f8 = gelu(x, b) -> act_f8
              back = cast(act_f8) -> back
              twice = add(back, b) -> twice
              act2 = gelu(twice) -> act2
              wide = add(w, w) -> wide
              narrow = cast(wide) -> narrow
              act3 = gelu(narrow) -> act3
              both = add(act2, twice) -> both
              y = add(both, act3) -> y
        "#]],
    );
}

const EPILOGUES: &str = r#"
[[tensor]]
name = "w"
shape = [32, 32]
dtype = "f16"
role = "weight"

[[tensor]]
name = "big"
shape = [2, 16, 32]
dtype = "f16"
role = "input"

[[op]]
name = "p"
op = "matmul"
inputs = ["x", "w"]
dtype = "f16"

[[op]]
name = "pb"
op = "add"
inputs = ["b", "p"]
dtype = "f16"

[[op]]
name = "pg"
op = "gelu"
inputs = ["pb"]
dtype = "f16"

[[op]]
name = "pc"
op = "cast"
inputs = ["pg"]
dtype = "f143"

[[op]]
name = "q"
op = "matmul"
inputs = ["x", "w"]
dtype = "f16"

[[op]]
name = "late"
op = "gelu"
inputs = ["x"]
dtype = "f16"

[[op]]
name = "ql"
op = "add"
inputs = ["q", "late"]
dtype = "f16"

[[op]]
name = "s"
op = "matmul"
inputs = ["x", "w"]
dtype = "f16"

[[op]]
name = "wide"
op = "add"
inputs = ["s", "big"]
dtype = "f16"

[[op]]
name = "u"
op = "matmul"
inputs = ["x", "w"]
dtype = "f16"

[[op]]
name = "us"
op = "sub"
inputs = ["u", "b"]
dtype = "f16"

[check]
reference_precision = "device"
min_cosine_similarity = 0.99
max_abs_error = 0.1
outputs = ["pc", "ql", "wide", "us"]
"#;

#[test]
fn a_matrix_product_absorbs_the_elementwise_steps_after_it_into_its_epilogue() {
    // The bias add (on either side), the GELU and the cast fuse; an add of
    // a tensor made after the product does not (the merged operation sits
    // at the product's place), nor one that broadcasts the product to a
    // larger shape, nor a subtraction (not an epilogue step).
    check(
        &format!("{HEAD}{EPILOGUES}"),
        expect![[r#"
            p+pb+pg+pc: matmul -> add -> gelu -> cast, p[16, 32], pb[16, 32], pg[16, 32] not materialised, writes f143[16, 32]*2^0
            1 fused operations, 8 operations left
              p+pb+pg+pc = matmul(x, w, b) -> pc
              q = matmul(x, w) -> q
              late = gelu(x) -> late
              ql = add(q, late) -> ql
              s = matmul(x, w) -> s
              wide = add(s, big) -> wide
              u = matmul(x, w) -> u
              us = sub(u, b) -> us
        "#]],
    );
    let graph = legalized(&format!("{HEAD}{EPILOGUES}"));
    let fused = fuse(&graph);
    let OpKind::Matmul { epilogue, .. } = &fused.graph.ops[0].kind else {
        panic!("a product first");
    };
    assert_eq!(*epilogue, [EpilogueStep::Add, EpilogueStep::Gelu]);
}

#[test]
fn a_step_the_cost_model_declines_stays_apart_and_the_cast_still_folds() {
    let graph = legalized(&format!("{HEAD}{EPILOGUES}"));
    let fusion = fuse_with(&graph, &|_, _, _| false);
    let names: Vec<&str> = fusion.graph.ops.iter().map(|op| op.name.as_str()).collect();
    assert_eq!(
        names,
        ["p", "pb+pg+pc", "q", "late", "ql", "s", "wide", "u", "us"]
    );
}
