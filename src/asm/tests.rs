//! Unit tests through one helper: sources in a `MemoryFs`, the object dump
//! or the rendered errors out.

use super::*;
use crate::db::MemoryFs;
use expect_test::{expect, Expect};

fn run(files: &[(&str, &str)], defines: &[(&str, &str)]) -> String {
    let fs = MemoryFs::new();
    for (path, text) in files {
        fs.write(*path, text);
    }
    let options = AssembleOptions {
        defines: defines
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        include_dirs: vec!["inc".into()],
    };
    let assembly = assemble_file(&fs, Utf8Path::new(files[0].0), &options);
    match &assembly.object {
        Some(object) => object.dump(),
        None => assembly.render_errors(),
    }
}

fn check(files: &[(&str, &str)], expect: Expect) {
    expect.assert_eq(&run(files, &[]));
}

#[test]
fn data_directives_and_symbols() {
    check(
        &[("k.S", ".data\n.globl table\ntable: .word 1, -1, end - table\n.half 0x1234\n.byte 1, 2\nend:\n")],
        expect![[r#"
            section 0 .data data align=4 size=16
              0000: 00000001 ffffffff 00000010 02011234
            symbol table .data+0x0 size=0 global
            symbol end .data+0x10 size=0 local
        "#]],
    );
}
