//! Unit tests through two helpers: sources in a `MemoryFs`, the object dump
//! or the rendered errors out. Instructions go through a small toy encoding
//! so the assembler's own handling of them is pinned down independently of
//! the real instruction set.

use super::*;
use crate::isa::{Encoded, Fixup, InstError, Operand, RelocKind, Value};
use crate::target::IPU21;
use crate::vfs::MemoryFs;
use expect_test::{expect, Expect};

/// `nop` = 0; `add $mD, $mS, imm8` = 0x1DSS_00II; `setzi $mD, value` =
/// 0x2D00_0000 with an `abs32` fixup for symbols; `fadd` is the only aux
/// instruction (0x3000_0000) and must be paired with a main one.
struct Toy;

fn reg(operand: Option<&Operand>, index: usize) -> Result<u32, InstError> {
    match operand {
        Some(Operand::Register(name)) => name
            .strip_prefix('m')
            .and_then(|n| n.parse::<u32>().ok())
            .filter(|n| *n < 16)
            .ok_or(InstError {
                operand: Some(index),
                message: format!("`${name}` is not an $m register"),
            }),
        _ => Err(InstError {
            operand: Some(index),
            message: "expected an $m register".into(),
        }),
    }
}

impl Encoder for Toy {
    fn assemble(&self, mnemonic: &str, ops: &[Operand]) -> Result<Encoded, InstError> {
        let plain = |word| Ok(Encoded { word, fixup: None });
        match mnemonic {
            "nop" => plain(0),
            "fadd" => plain(0x3000_0000),
            "add" => {
                let (d, s) = (reg(ops.first(), 0)?, reg(ops.get(1), 1)?);
                match ops.get(2) {
                    Some(Operand::Value(Value::Const(v))) if (0..256).contains(v) => {
                        plain(0x1000_0000 | d << 24 | s << 16 | *v as u32)
                    }
                    _ => Err(InstError {
                        operand: Some(2),
                        message: "expected an immediate in 0..256".into(),
                    }),
                }
            }
            "setzi" => {
                let d = reg(ops.first(), 0)?;
                match ops.get(1) {
                    Some(Operand::Value(Value::Const(v))) => {
                        plain(0x2000_0000 | d << 24 | (*v as u32 & 0xFFFF))
                    }
                    Some(Operand::Value(Value::Symbol { name, addend })) => Ok(Encoded {
                        word: 0x2000_0000 | d << 24,
                        fixup: Some(Fixup {
                            kind: RelocKind::Abs32,
                            symbol: name.clone(),
                            addend: *addend,
                        }),
                    }),
                    _ => Err(InstError {
                        operand: Some(1),
                        message: "expected a value".into(),
                    }),
                }
            }
            _ => Err(InstError {
                operand: None,
                message: format!("unknown instruction `{mnemonic}`"),
            }),
        }
    }

    fn check_bundle(&self, main: u32, aux: u32) -> Result<(), InstError> {
        if main >> 28 == 3 || aux >> 28 != 3 {
            return Err(InstError {
                operand: None,
                message: "the second instruction must be an aux instruction".into(),
            });
        }
        Ok(())
    }
}

fn run(files: &[(&str, &str)], defines: &[(&str, &str)]) -> Assembly {
    let fs = MemoryFs::new();
    for (path, text) in files {
        fs.write(*path, text);
    }
    let defines = defines
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let pre = preprocess(&fs, Utf8Path::new(files[0].0), &defines, &["lib".into()]);
    assemble_with(pre, &Toy)
}

fn output(assembly: &Assembly) -> String {
    match &assembly.object {
        Some(object) => object.dump(),
        None => assembly.render_errors(),
    }
}

fn check(files: &[(&str, &str)], expect: Expect) {
    expect.assert_eq(&output(&run(files, &[])));
}

#[test]
fn instructions_bundles_padding_and_fixups() {
    check(
        &[(
            "k.S",
            "    .text\n    .globl f\nf:  add $m1, $m2, 3 ; setzi $m0, table + 4\n    .align 16\n    { add $m3, $m3, 1 ; fadd }\n    setzi $m4, ext\n    .extern ext\n    .data\ntable: .word f, 9\n",
        )],
        expect![[r#"
            section 0 .text code align=16 size=28
              0000: 11020003 20000000 00000000 00000000
              0010: 13030001 30000000 24000000
            section 1 .data data align=4 size=8
              0000: 00000000 00000009
            symbol f .text+0x0 size=0 global
            symbol table .data+0x0 size=0 local
            reloc .text+0x4 abs32 table+4
            reloc .text+0x18 abs32 ext+0
            reloc .data+0x0 abs32 f+0
        "#]],
    );
}

#[test]
fn instruction_errors_point_at_the_operand_or_mnemonic() {
    check(
        &[(
            "k.S",
            "  .text\n  add $m1, $a2, 3\n  add $m1, $m2, 300\n  mul $m1, $m2\n  setzi $m1, nowhere\n  nop\n  .align 8\n  { nop ; fadd }\n  { fadd ; nop }\n  .data\n  nop\n",
        )],
        expect![[r#"
            error: `$a2` is not an $m register
             --> k.S:2:12
              |
            2 |   add $m1, $a2, 3
              |            ^^^

            error: expected an immediate in 0..256
             --> k.S:3:17
              |
            3 |   add $m1, $m2, 300
              |                 ^^^

            error: unknown instruction `mul`
             --> k.S:4:3
              |
            4 |   mul $m1, $m2
              |   ^^^

            error: undefined symbol `nowhere`
             --> k.S:5:14
              |
            5 |   setzi $m1, nowhere
              |              ^^^^^^^

            error: invalid bundle: the second instruction must be an aux instruction
             --> k.S:9:3
              |
            9 |   { fadd ; nop }
              |   ^^^^^^^^^^^^^^

            error: instructions must be in a code section, not `.data`
              --> k.S:11:3
               |
            11 |   nop
               |   ^^^
        "#]],
    );
}

#[test]
fn include_dirs_and_function_like_macros_work_in_memory() {
    let assembly = run(
        &[
            ("src/k.S", "#include \"shared.h\"\n#define ADDR(base, i) ((base) + 4 * (i))\n  .data\n  .word ADDR(WIDTH, 2), N\n"),
            ("lib/shared.h", "#define WIDTH 0x100\n"),
        ],
        &[("N", "7")],
    );
    let read: Vec<String> = assembly
        .files_read()
        .iter()
        .map(|(p, _)| p.to_string())
        .collect();
    assert_eq!(read, vec!["src/k.S", "lib/shared.h"]);
    expect![[r#"
        section 0 .data data align=4 size=8
          0000: 00000108 00000007
    "#]]
    .assert_eq(&output(&assembly));
}

#[test]
fn a_missing_root_file_is_an_error() {
    check(&[("k.S", "")], expect![[r#""#]]);
    let assembly = run(&[("a.S", "#include \"b.S\"\n")], &[]);
    assert_eq!(assembly.errors[0].kind, ErrorKind::IncludeNotFound);
    let fs = MemoryFs::new();
    let missing = assemble_file(&fs, Utf8Path::new("nope.S"), &AssembleOptions::default());
    expect![[r#"
        error: cannot read kernel source `nope.S`: it does not exist
    "#]]
    .assert_eq(&missing.render_errors());
}

#[test]
fn labels_and_sets_resolve_forward_and_report_cycles() {
    check(
        &[("k.S", "  .data\n  .set A, end - start\n  .set LOOP, LOOP + 1\nstart: .word A, A * 2\nend:\n  .word LOOP\n")],
        expect![[r#"
            error: `LOOP` is defined in terms of itself
             --> k.S:3:14
              |
            3 |   .set LOOP, LOOP + 1
              |              ^^^^

            error: `LOOP` is defined in terms of itself
             --> k.S:6:9
              |
            6 |   .word LOOP
              |         ^^^^
        "#]],
    );
}

fn object(source: &str) -> Object {
    let assembly = run(&[("k.S", source)], &[]);
    match assembly.object {
        Some(object) => object,
        None => panic!("{}", assembly.sources.render(&assembly.errors)),
    }
}

#[test]
fn the_linker_places_resolves_and_patches() {
    let a = object("  .text\n  .globl main\nmain: setzi $m0, data_b\n  setzi $m1, local\nlocal: nop\n  .extern data_b\n");
    let b = object("  .data\n  .globl data_b\ndata_b: .word main + 8\n  .extern main\n");
    let objects = [a, b];
    let placements = Placement::pack(&objects, IPU21.memory.region0.start, 0x80000);
    let linked = link(&objects, &placements, &IPU21).expect("links");
    expect![[r#"
        section object=0 .text 0x4c000..0x4c00c
        section object=1 .data 0x80000..0x80004
        symbol data_b = 0x80000 size=0 object=1
        symbol main = 0x4c000 size=0 object=0
    "#]]
    .assert_eq(&linked.dump());
    let words = |s: &link::PlacedSection| -> Vec<String> {
        s.bytes
            .chunks(4)
            .map(|w| format!("{:08x}", u32::from_le_bytes([w[0], w[1], w[2], w[3]])))
            .collect()
    };
    expect![[r#"[["00080000", "0004c008", "00000000"], ["0004c008"]]"#]].assert_eq(&format!(
        "{:?}",
        linked.sections.iter().map(words).collect::<Vec<_>>()
    ));
}

#[test]
fn the_linker_reports_every_problem() {
    let a = object("  .text\n  .globl main\nmain: setzi $m0, missing\n  .extern missing\n");
    let b = object("  .text\n  .globl main\nmain: nop\n");
    let c = object("  .data\n  .word 1\n");
    let objects = [a, b, c];
    let placements = vec![
        Placement {
            object: 0,
            section: ".text".into(),
            address: 0x80000,
        },
        Placement {
            object: 1,
            section: ".text".into(),
            address: 0x4C002,
        },
        Placement {
            object: 1,
            section: ".nope".into(),
            address: 0x4C000,
        },
    ];
    let errors = link(&objects, &placements, &IPU21).unwrap_err();
    let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
    expect![[r#"
        section `.text` of object 0 at 0x80000: code must lie in region 0 (0x4c000..0x80000)
        section `.text` of object 1 at 0x4c002: not aligned to 4 bytes
        placement names section `.nope` of object 1, which does not exist
        section `.data` of object 2 is not placed
        symbol `main` is defined in object 0 and object 1
        undefined symbol `missing` referenced from object 0 section `.text` offset 0x0"#]]
    .assert_eq(&text.join("\n"));
}

/// Each error as `kind path:line:column message`, for tests that care
/// where errors are and what they say, not how they render.
fn located(assembly: &Assembly) -> String {
    assembly
        .errors
        .iter()
        .map(|e| match &e.location {
            Some(l) => format!(
                "{} {}:{}:{} {}\n",
                e.kind.name(),
                l.path,
                l.line,
                l.column,
                e.message
            ),
            None => format!("{} (nowhere) {}\n", e.kind.name(), e.message),
        })
        .collect()
}

#[test]
fn limits_stop_runaway_sources_with_located_errors() {
    let check = |files: &[(&str, &str)], expect: Expect| {
        expect.assert_eq(&located(&run(files, &[])));
    };
    let parens = format!(
        "  .data\n  .word {}1{}\n",
        "(".repeat(3000),
        ")".repeat(3000)
    );
    check(
        &[("k.S", &parens)],
        expect![[r#"
            too-deep k.S:2:265 expression nested deeper than 256 levels
        "#]],
    );
    // Each macro is twice the one before: `X24` would be 16 million `1`s.
    let mut bomb = String::from("#define X0 1\n");
    for i in 0..24 {
        bomb.push_str(&format!("#define X{} (X{i} + X{i})\n", i + 1));
    }
    check(
        &[(
            "k.S",
            &format!("{bomb}  .data\n  .word X24\n#if X24\n#endif\n"),
        )],
        expect![[r#"
            too-large k.S:27:9 macro expansion exceeds 1 MiB (a macro that uses another several times grows exponentially)
            too-large k.S:28:5 macro expansion exceeds 1 MiB (a macro that uses another several times grows exponentially)
        "#]],
    );
    check(
        &[(
            "k.S",
            "  .data\n  .rept 1000000000\n  .endr\n  .rept 500000\n  .rept 1000000\n  .endr\n  .endr\n",
        )],
        expect![[r#"
            value-out-of-range k.S:2:9 `.rept` count 1000000000 is negative or expands past 1048576 lines
            too-deep k.S:5:3 macro or `.rept` expansion nested deeper than 64 or past 1048576 lines
        "#]],
    );
    check(
        &[(
            "k.S",
            "  .data\n  .rept 1000\n  .space 0x9C000\n  .endr\n  .word 1\n",
        )],
        expect![[r#"
            too-large k.S:3:10 the object would hold 1277952 bytes, more than tile memory (0x9c000 bytes)
        "#]],
    );
    check(
        &[(
            "k.S",
            "  .data\n  .word 9223372036854775807*9223372036854775807\n  .text\n  .type f, @function\n  .ipub_cost \"1/0\"\nf: nop\n",
        )],
        expect![[r#"
            bad-expression k.S:2:9 `*` overflows: the result does not fit in 64 bits
            bad-expression k.S:5:14 bad cost formula: division by zero
        "#]],
    );
    // A macro that calls itself with its argument doubled.
    check(
        &[(
            "k.S",
            "  .macro grow a\n  grow \\a\\a\n  .endm\n  grow xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n",
        )],
        expect![[r#"
            too-large k.S:2:3 the expansion of macro `grow` has a line longer than 1 MiB
        "#]],
    );
    // A header included ten thousand times.
    let header = format!("// {}\n", "x".repeat(8 << 10));
    let include = |name: &str| format!("#include \"{name}\"\n").repeat(100);
    check(
        &[
            ("k.S", &include("b.h")),
            ("b.h", &include("c.h")),
            ("c.h", &header),
        ],
        expect![[r#"
            too-large b.h:73:10 the kernel's sources and includes exceed 64 MiB in all
        "#]],
    );
    // A parameter used ten thousand times, given a long argument: checked
    // while the text is built, for `#define` and `.macro` alike.
    let long = "x".repeat(2000);
    let uses = " a".repeat(10_000);
    let escaped = "\\a".repeat(10_000);
    check(
        &[(
            "k.S",
            &format!("#define M(a){uses}\n  .data\n  .word M({long})\n  .macro m a\n  .word {escaped}\n  .endm\n  m {long}\n"),
        )],
        expect![[r#"
            too-large k.S:3:9 macro expansion exceeds 1 MiB (a macro that uses another several times grows exponentially)
            too-large k.S:7:3 the expansion of macro `m` has a line longer than 1 MiB
        "#]],
    );
    let mistakes = "  bogus\n".repeat(5000);
    let assembly = run(&[("k.S", &mistakes)], &[]);
    assert_eq!(assembly.errors.len(), crate::asm::limits::MAX_ERRORS);
    let last = assembly.errors.last().expect("errors");
    assert_eq!(last.notes, ["stopped after 1000 errors"]);
}
