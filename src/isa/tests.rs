use super::table::{self, Kind};
use super::*;
use expect_test::expect;
use half::f16;

/// Parses one instruction as `Inst`'s `Display` prints it, the way the
/// assembler's operand parser would.
fn parse(text: &str) -> (String, Vec<Operand>) {
    let (mnemonic, rest) = text.split_once(' ').unwrap_or((text, ""));
    let operands = rest
        .split(", ")
        .filter(|s| !s.is_empty())
        .map(|s| match s.strip_prefix('$') {
            Some(reg) => Operand::Register(reg.to_ascii_lowercase()),
            None => {
                let v = match s.strip_prefix("0x") {
                    Some(hex) => i64::from_str_radix(hex, 16).unwrap(),
                    None => s.parse().unwrap(),
                };
                Operand::Value(Value::Const(v))
            }
        })
        .collect();
    (mnemonic.to_string(), operands)
}

fn reg(name: &str) -> Operand {
    Operand::Register(name.into())
}

fn imm(v: i64) -> Operand {
    Operand::Value(Value::Const(v))
}

fn sample(kind: Kind) -> Operand {
    match kind {
        Kind::M => reg("m3"),
        Kind::MInc => reg("m2+="),
        Kind::MTriple => reg("m4:6+="),
        Kind::A => reg("a5"),
        Kind::APair => reg("a2:3"),
        Kind::AQuad => reg("a4:7"),
        Kind::CReg => reg("fp8cfg"),
        Kind::SImm16 => imm(-5),
        Kind::UImm16 => imm(0x1234),
        Kind::Shift => imm(7),
        Kind::Addr21 => imm(0x4c010),
        Kind::Count16 => imm(1000),
        Kind::Len8 => imm(4),
        Kind::AccPair => imm(1),
    }
}

#[test]
fn every_op_has_exactly_one_row_and_one_immediate_at_most() {
    let mut seen = std::collections::HashSet::new();
    for row in table::all() {
        assert!(seen.insert(row.op), "{:?} has two rows", row.op);
        let imms = row
            .operands
            .iter()
            .filter(|(k, _)| k.is_immediate())
            .count();
        assert!(imms <= 1, "{} has {imms} immediates", row.mnemonic);
        let mut used = row.fixed_mask;
        for (_, f) in row.operands {
            assert_eq!(
                used & f.mask(),
                0,
                "{} has overlapping fields",
                row.mnemonic
            );
            used |= f.mask();
        }
    }
    assert_eq!(seen.len(), table::lookup().by_op.len());
    for (i, row) in table::lookup().by_op.iter().enumerate() {
        assert_eq!(row.op as usize, i);
    }
}

#[test]
fn typed_encoding_checks_operands_as_assembly_does() {
    let inst = |op, r: [u8; 4], imm| Inst { op, r, imm };
    let cases = [
        inst(Op::MulI, [4, 4, 0, 0], 0x8000),
        inst(Op::SetziM, [1, 0, 0, 0], 1 << 21),
        inst(Op::CmpultI, [5, 4, 0, 0], -1),
        inst(Op::AddR, [16, 1, 2, 0], 0),
        inst(Op::RptR, [3, 0, 0, 0], 0),
    ];
    let messages: Vec<String> = cases
        .iter()
        .map(|i| match encode(i) {
            Ok(word) => format!("{word:08x}"),
            Err(e) => format!("{:?}: {}", e.operand, e.message),
        })
        .collect();
    expect![[r#"
        [
            "Some(2): `mul`: 32768 is out of range for a signed 16-bit immediate (-32768..=32767)",
            "Some(1): `setzi`: 2097152 is out of range for a 21-bit address (0..=2097151)",
            "Some(2): `cmpult`: -1 is out of range for an unsigned 16-bit immediate (0..=65535)",
            "Some(0): `add`: 16 is not an `$m` register",
            "Some(1): `rpt`: 0 is not a repeat body length in words",
        ]
    "#]]
    .assert_debug_eq(&messages);
}

#[test]
fn every_instruction_round_trips_through_decode_and_disassembly() {
    let mut listing = String::new();
    for row in table::all() {
        let operands: Vec<Operand> = row.operands.iter().map(|(k, _)| sample(*k)).collect();
        let encoded = assemble(row.mnemonic, &operands).expect(row.mnemonic);
        assert_eq!(encoded.fixup, None);
        let inst = decode(encoded.word).expect(row.mnemonic);
        assert_eq!(inst.op, row.op, "{} chose another row", row.mnemonic);
        assert_eq!(
            encode(&inst),
            Ok(encoded.word),
            "{} encodes typed",
            row.mnemonic
        );
        let text = inst.to_string();
        let (mnemonic, back) = parse(&text);
        assert_eq!(
            assemble(&mnemonic, &back).unwrap().word,
            encoded.word,
            "{text}"
        );
        listing.push_str(&format!("{:08x}  {text}\n", encoded.word));
    }
    expect![[r#"
        00000000  nop
        00600001  exitz $m3
        00000002  halt
        00660003  run $m3, $m3
        00660004  runall $m3, $m3
        00600005  get $m3, $fp8cfg
        00060006  put $fp8cfg, $m3
        00600007  br $m3
        00000008  ampclr
        00400009  ldcwei $m2+=
        0040000a  ld128cwei $m2+=
        02666000  add $m3, $m3, $m3
        02666001  sub $m3, $m3, $m3
        02666002  and $m3, $m3, $m3
        02666003  or $m3, $m3, $m3
        02666004  xor $m3, $m3, $m3
        02666005  shl $m3, $m3, $m3
        02666006  shr $m3, $m3, $m3
        02666007  sar $m3, $m3, $m3
        02666008  mul $m3, $m3, $m3
        02666009  min $m3, $m3, $m3
        0266600a  max $m3, $m3, $m3
        0266600b  cmpeq $m3, $m3, $m3
        0266600c  cmpult $m3, $m3, $m3
        0266600d  cmpslt $m3, $m3, $m3
        0266000e  mov $m3, $m3
        02a6000f  mov $a5, $m3
        026a0010  mov $m3, $a5
        0866fffb  add $m3, $m3, -5
        0a66fffb  sub $m3, $m3, -5
        0c66fffb  mul $m3, $m3, -5
        0e661234  and $m3, $m3, 4660
        10661234  or $m3, $m3, 4660
        12661234  xor $m3, $m3, 4660
        14660007  shl $m3, $m3, 7
        16660007  shr $m3, $m3, 7
        18660007  sar $m3, $m3, 7
        1a66fffb  min $m3, $m3, -5
        1c66fffb  max $m3, $m3, -5
        1e66fffb  cmpeq $m3, $m3, -5
        20661234  cmpult $m3, $m3, 4660
        2266fffb  cmpslt $m3, $m3, -5
        2464c010  setzi $m3, 0x4c010
        26a4c010  setzi $a5, 0x4c010
        28601234  sethi $m3, 4660
        2aa01234  sethi $a5, 4660
        2c04c010  br 0x4c010
        2e64c010  brz $m3, 0x4c010
        3064c010  brnz $m3, 0x4c010
        3264c010  brnzdec $m3, 0x4c010
        3464c010  call $m3, 0x4c010
        3603e804  rpt 1000, 4
        38600004  rpt $m3, 4
        3a001234  sync 4660
        04aa0000  mov $a5, $a5
        04aaa001  f32add $a5, $a5, $a5
        04aaa002  f32sub $a5, $a5, $a5
        04aaa003  f32mul $a5, $a5, $a5
        04aaa004  f32max $a5, $a5, $a5
        04aaa005  f32min $a5, $a5, $a5
        04444006  f32v2add $a2:3, $a2:3, $a2:3
        04444007  f32v2sub $a2:3, $a2:3, $a2:3
        04444008  f32v2mul $a2:3, $a2:3, $a2:3
        04444009  f32v2max $a2:3, $a2:3, $a2:3
        0444400a  f32v2min $a2:3, $a2:3, $a2:3
        04aaa00b  f16v2add $a5, $a5, $a5
        04aaa00c  f16v2sub $a5, $a5, $a5
        04aaa00d  f16v2mul $a5, $a5, $a5
        04aaa00e  f16v2max $a5, $a5, $a5
        04aaa00f  f16v2min $a5, $a5, $a5
        04444010  f16v4add $a2:3, $a2:3, $a2:3
        04444011  f16v4sub $a2:3, $a2:3, $a2:3
        04444012  f16v4mul $a2:3, $a2:3, $a2:3
        04444013  f16v4max $a2:3, $a2:3, $a2:3
        04444014  f16v4min $a2:3, $a2:3, $a2:3
        04aa0015  f32exp $a5, $a5
        04aa0016  f32rcp $a5, $a5
        04aa0017  f32rsqrt $a5, $a5
        04aa0018  f32sqrt $a5, $a5
        04aa0019  f32erf $a5, $a5
        04aa001a  f16tof32 $a5, $a5
        04aa001b  f32tof16 $a5, $a5
        044a001c  f16v2tof32 $a2:3, $a5
        04a4001d  f32v2tof16 $a5, $a2:3
        04aaa01e  f16v2pack $a5, $a5, $a5
        04aa001f  f32fromi32 $a5, $a5
        04aa0020  f32toi32 $a5, $a5
        04a40021  f32v2hadd $a5, $a2:3
        04a40022  f32v2hmax $a5, $a2:3
        04440023  f16v4sum $a2:3, $a2:3
        04a40024  f16v4hmax $a5, $a2:3
        04a40025  f16v4tof8 $a5, $a2:3
        044a0026  f8v4tof16 $a2:3, $a5
        04444027  f16v4amp $a2:3, $a2:3, $a2:3
        04444028  f8v8amp $a2:3, $a2:3, $a2:3
        04400029  f16v4acc $a2:3
        0480002a  f32v4acc $a4:7
        0480002b  f32v4sqacc $a4:7
        0442002c  f32v2gina $a2:3, 1
        04aaa02d  f32div $a5, $a5, $a5
        0484802e  f16v4sisoamp $a4:7, $a2:3, $a4:7
        04aa002f  f16v2exp $a5, $a5
        04000030  fnop
        04aa0031  f16v2erf $a5, $a5
        06666000  ldz8 $m3, $m3, $m3
        06666001  lds8 $m3, $m3, $m3
        06666002  ldz16 $m3, $m3, $m3
        06666003  lds16 $m3, $m3, $m3
        06a66004  ldb16 $a5, $m3, $m3
        06666005  ld32 $m3, $m3, $m3
        06a66006  ld32 $a5, $m3, $m3
        06466007  ld64 $a2:3, $m3, $m3
        06866008  ld128 $a4:7, $m3, $m3
        06666009  st8 $m3, $m3, $m3
        0666600a  st16 $m3, $m3, $m3
        0666600b  st32 $m3, $m3, $m3
        06a6600c  st32 $a5, $m3, $m3
        0646600d  st64 $a2:3, $m3, $m3
        0686600e  st128 $a4:7, $m3, $m3
        0644480f  ld2xst64pace $a2:3, $a2:3, $a2:3, $m4:6+=
        06446010  ld64step $a2:3, $m2+=, $m3
        06446011  st64step $a2:3, $m2+=, $m3
        4066fffb  ldz8 $m3, $m3, -5
        4266fffb  lds8 $m3, $m3, -5
        4466fffb  ldz16 $m3, $m3, -5
        4666fffb  lds16 $m3, $m3, -5
        48a6fffb  ldb16 $a5, $m3, -5
        4a66fffb  ld32 $m3, $m3, -5
        4ca6fffb  ld32 $a5, $m3, -5
        4e46fffb  ld64 $a2:3, $m3, -5
        5086fffb  ld128 $a4:7, $m3, -5
        5266fffb  st8 $m3, $m3, -5
        5466fffb  st16 $m3, $m3, -5
        5666fffb  st32 $m3, $m3, -5
        58a6fffb  st32 $a5, $m3, -5
        5a46fffb  st64 $a2:3, $m3, -5
        5c86fffb  st128 $a4:7, $m3, -5
        4065fffb  ldz8step $m3, $m2+=, -5
        4265fffb  lds8step $m3, $m2+=, -5
        4465fffb  ldz16step $m3, $m2+=, -5
        4665fffb  lds16step $m3, $m2+=, -5
        48a5fffb  ldb16step $a5, $m2+=, -5
        4a65fffb  ld32step $m3, $m2+=, -5
        4ca5fffb  ld32step $a5, $m2+=, -5
        4e45fffb  ld64step $a2:3, $m2+=, -5
        5085fffb  ld128step $a4:7, $m2+=, -5
        5265fffb  st8step $m3, $m2+=, -5
        5465fffb  st16step $m3, $m2+=, -5
        5665fffb  st32step $m3, $m2+=, -5
        58a5fffb  st32step $a5, $m2+=, -5
        5a45fffb  st64step $a2:3, $m2+=, -5
        5c85fffb  st128step $a4:7, $m2+=, -5
    "#]]
    .assert_eq(&listing);
}

#[test]
fn every_decodable_word_round_trips() {
    // A deterministic sample of the word space (a xorshift sequence) plus
    // every major opcode with all operand bits set.
    let mut x: u32 = 0x9E37_79B9;
    let mut decoded = 0;
    for i in 0..400_000u32 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let word = if i < 128 { (i << 25) | 0x01FF_FFFF } else { x };
        // Most random words set reserved bits; clear the bits outside the
        // row's fields so that every row is exercised.
        let word = match table::lookup().by_major[(word >> 25) as usize].first() {
            Some(row) => (word & row.used_mask() & !row.fixed_mask) | row.pattern,
            None => word,
        };
        let Ok(inst) = decode(word) else { continue };
        decoded += 1;
        let (mnemonic, operands) = parse(&inst.to_string());
        let again = assemble(&mnemonic, &operands).unwrap_or_else(|e| panic!("{inst}: {e}"));
        assert_eq!(again.word, word, "{inst}");
    }
    assert!(decoded > 100_000, "only {decoded} words decoded");
}

#[test]
fn decode_rejects_reserved_bits_unknown_opcodes_and_bad_operands() {
    let nop = assemble("nop", &[]).unwrap().word;
    expect![[r#"`nop` word 0x00000100 sets reserved bits 0x00000100"#]]
        .assert_eq(&decode(nop | 0x100).unwrap_err().to_string());
    expect![[r#"no instruction has opcode bits 0xfe000000"#]]
        .assert_eq(&decode(0xFE00_0000).unwrap_err().to_string());
    // f16v4add with an odd first register of a pair.
    let word = assemble("f16v4add", &[reg("a2:3"), reg("a0:1"), reg("a4:5")])
        .unwrap()
        .word;
    expect![[r#"`f16v4add` word 0x04608010 has an invalid operand 0"#]]
        .assert_eq(&decode(word | (1 << 21)).unwrap_err().to_string());
}

fn error(mnemonic: &str, operands: &[Operand]) -> String {
    let e = assemble(mnemonic, operands).unwrap_err();
    format!("{:?}: {}", e.operand, e.message)
}

#[test]
fn assemble_reports_the_operand_at_fault() {
    let sym = Operand::Value(Value::Symbol {
        name: "table".into(),
        addend: 4,
    });
    let out = [
        error("frob", &[]),
        error("add", &[reg("m1")]),
        error("add", &[reg("m1"), reg("m2"), imm(40000)]),
        error("add", &[reg("m1"), reg("a2"), reg("m3")]),
        error("ld64", &[reg("a1:2"), reg("m2"), imm(0)]),
        error("ld128", &[reg("a2:5"), reg("m2"), imm(0)]),
        error("add", &[reg("m1"), reg("m2"), sym.clone()]),
        error("rpt", &[imm(0x10000), imm(2)]),
        error("rpt", &[imm(3), imm(0)]),
        error("put", &[reg("cycles"), reg("m2")]),
        error(
            "ld2xst64pace",
            &[reg("a0:1"), reg("a2:3"), reg("a4:5"), reg("m13:15+=")],
        ),
        error("setzi", &[reg("m1"), imm(1 << 21)]),
    ]
    .join("\n");
    expect![[r#"
        None: unknown instruction `frob`
        None: `add` takes 3 operand(s), not 1
        Some(2): 40000 is out of range for a signed 16-bit immediate (-32768..=32767)
        Some(1): expected an `$m` register, found `$a2`
        Some(0): expected an `$a` register pair (`$aN:N+1`, N even), found `$a1:2`
        Some(0): expected an `$a` register quad (`$aN:N+3`, N a multiple of 4), found `$a2:5`
        Some(2): `table` is not a constant; only 21-bit address operands take symbols
        Some(0): 65536 is out of range for a repeat count (0..=65535)
        Some(1): 0 is out of range for a repeat body length in words (1..=255)
        Some(0): expected a control register (`$fp8cfg`, `$wid`, `$tile`, `$wstatus`), found `$cycles`
        Some(3): expected three post-incremented `$m` registers (`$mN:N+2+=`, N <= 12), found `$m13:15+=`
        Some(1): 2097152 is out of range for a 21-bit address (0..=2097151)"#]]
    .assert_eq(&out);
}

#[test]
fn address_operands_take_symbols_through_abs21_relocations() {
    let sym = Operand::Value(Value::Symbol {
        name: "weights".into(),
        addend: 16,
    });
    let encoded = assemble("setzi", &[reg("m1"), sym.clone()]).unwrap();
    let fixup = encoded.fixup.clone().unwrap();
    assert_eq!(
        fixup,
        Fixup {
            kind: RelocKind::Abs21,
            symbol: "weights".into(),
            addend: 16
        }
    );
    let patched = apply_reloc(fixup.kind, encoded.word, 0x9_0010, 0x4c000).unwrap();
    assert_eq!(decode(patched).unwrap().to_string(), "setzi $m1, 0x90010");
    let call = assemble("call", &[reg("m10"), sym]).unwrap();
    let patched = apply_reloc(RelocKind::Abs21, call.word, 0x4c100, 0x4c000).unwrap();
    assert_eq!(decode(patched).unwrap().to_string(), "call $m10, 0x4c100");
    expect![[r#"address 0x200000 does not fit in 21 bits"#]].assert_eq(
        &apply_reloc(RelocKind::Abs21, call.word, 1 << 21, 0)
            .unwrap_err()
            .to_string(),
    );
    assert!(apply_reloc(RelocKind::Abs21, call.word, -4, 0).is_err());
    assert_eq!(apply_reloc(RelocKind::Abs32, 0, -1, 0), Ok(0xFFFF_FFFF));
    for kind in [RelocKind::Abs32, RelocKind::Abs21] {
        assert_eq!(RelocKind::from_name(kind.name()), Some(kind));
        assert!(!kind.is_pc_relative());
    }
}

#[test]
fn bundles_pair_a_plain_main_instruction_with_an_aux_one() {
    let w = |m: &str, ops: &[Operand]| assemble(m, ops).unwrap().word;
    let load = w("ld64step", &[reg("a0:1"), reg("m2+="), imm(8)]);
    let amp = w("f16v4amp", &[reg("a4:5"), reg("a0:1"), reg("a2:3")]);
    let branch = w("brnzdec", &[reg("m3"), imm(0x4c000)]);
    let add = w("add", &[reg("m1"), reg("m1"), imm(1)]);
    assert_eq!(check_bundle(load, amp), Ok(()));
    let out = [
        check_bundle(amp, load),
        check_bundle(branch, amp),
        check_bundle(load, add),
        check_bundle(0xFE00_0000, amp),
    ]
    .map(|r| r.unwrap_err().message)
    .join("\n");
    expect![[r#"
        `f16v4amp` issues in the aux pipeline and cannot be the first of a bundle
        `brnzdec` changes control flow and cannot be bundled
        `add` issues in the main pipeline and cannot be the second of a bundle
        no instruction has opcode bits 0xfe000000"#]]
    .assert_eq(&out);
}

#[test]
fn disassembly_shows_bundles_only_at_aligned_pairs() {
    let w = |m: &str, ops: &[Operand]| assemble(m, ops).unwrap().word;
    let words = [
        w("setzi", &[reg("m2"), imm(0x80000)]),
        w("rpt", &[imm(16), imm(2)]),
        w("ld64step", &[reg("a0:1"), reg("m2+="), imm(8)]),
        w("f16v4amp", &[reg("a4:5"), reg("a0:1"), reg("a2:3")]),
        w("f32add", &[reg("a0"), reg("a1"), reg("azero")]),
        0xFFFF_FFFF,
        w("exitz", &[reg("mzero")]),
    ];
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let text: Vec<String> = disassemble(&bytes, 0x4c000)
        .iter()
        .map(|l| l.to_string())
        .collect();
    expect![[r#"
        4c000  24480000           setzi $m2, 0x80000
        4c004  36001002           rpt 16, 2
        4c008  4e050008 04804027  { ld64step $a0:1, $m2+=, 8 ; f16v4amp $a4:5, $a0:1, $a2:3 }
        4c010  0403e001           f32add $a0, $a1, $azero
        4c014  ffffffff           .word 0xffffffff
        4c018  01e00001           exitz $mzero"#]]
    .assert_eq(&text.join("\n"));
}

#[test]
fn fp8_codes_round_trip_and_match_the_published_ranges() {
    for format in [Fp8Format::F143, Fp8Format::F152] {
        for code in 0..=255u8 {
            let v = format.to_f64(code);
            assert_eq!(format.from_f64(v), code, "{format:?} {code:#04x}");
            // Every FP8 value is exact in f16 at scale 0: both formats'
            // ranges lie inside f16's and their significands are shorter.
            let h = format.to_f16(code, 0);
            if code == NAN_CODE {
                assert!(h.is_nan());
            } else {
                assert_eq!(f64::from(h.to_f32()), v);
                assert_eq!(format.from_f16(h, 0), code);
            }
        }
    }
    let f143 = Fp8Format::F143;
    let f152 = Fp8Format::F152;
    assert_eq!(f143.max_finite(), 240.0);
    assert_eq!(f152.max_finite(), 57344.0);
    assert_eq!(f143.to_f64(1), 2f64.powi(-10));
    assert_eq!(f152.to_f64(1), 2f64.powi(-17));
}

const NAN_CODE: u8 = super::fp8::NAN;

#[test]
fn fp8_rounding_saturation_signs_and_scale() {
    let f143 = Fp8Format::F143;
    let cases = [
        1.0,
        1.0625, // halfway between 1 and 1.125: ties to even (1.0)
        1.1875, // halfway between 1.125 and 1.25: ties to even (1.25)
        239.0,
        1e9, // saturates
        -1e9,
        f64::INFINITY,
        -2f64.powi(-12), // rounds to zero: +0, never the NaN pattern
        2f64.powi(-11),  // halfway to the smallest subnormal: to even (0)
        3.0 * 2f64.powi(-11),
        f64::NAN,
    ];
    let out: Vec<String> = cases
        .iter()
        .map(|&x| {
            let c = f143.from_f64(x);
            format!("{x:e} -> {c:#04x} = {}", f143.to_f64(c))
        })
        .collect();
    expect![[r#"
        1e0 -> 0x40 = 1
        1.0625e0 -> 0x40 = 1
        1.1875e0 -> 0x42 = 1.25
        2.39e2 -> 0x7f = 240
        1e9 -> 0x7f = 240
        -1e9 -> 0xff = -240
        inf -> 0x7f = 240
        -2.44140625e-4 -> 0x00 = 0
        4.8828125e-4 -> 0x00 = 0
        1.46484375e-3 -> 0x02 = 0.001953125
        NaN -> 0x80 = NaN"#]]
    .assert_eq(&out.join("\n"));
    // With scale 4 the tensor value 16 is stored as 1.0.
    assert_eq!(f143.from_f16(f16::from_f32(16.0), 4), 0x40);
    assert_eq!(f143.to_f16(0x40, 4), f16::from_f32(16.0));
    assert_eq!(f143.to_f16(0x40, -3), f16::from_f32(0.125));
}

#[test]
fn erf_matches_reference_values() {
    // Values from the series definition to 17 digits (Abramowitz & Stegun
    // table 7.1 and standard libraries agree on these).
    let cases = [
        (0.0, 0.0),
        (0.1, 0.112_462_916_018_284_9),
        (0.5, 0.520_499_877_813_046_5),
        (1.0, 0.842_700_792_949_714_9),
        (2.0, 0.995_322_265_018_952_7),
        (3.0, 0.999_977_909_503_001_4),
        (4.0, 0.999_999_984_582_742_1),
        (-1.0, -0.842_700_792_949_714_9),
    ];
    for (x, want) in cases {
        let got = erf(x);
        assert!(
            (got - want).abs() <= 4.0 * f64::EPSILON,
            "erf({x}) = {got}, want {want}"
        );
    }
    // Continuity where the two methods meet.
    let below = erf(3.0 - 1e-12);
    let above = erf(3.0);
    assert!((above - below).abs() < 1e-15);
    assert_eq!(erf(7.0), 1.0);
    assert!(erf(f64::NAN).is_nan());
}

/// The book's reference table is generated from the instruction table;
/// `UPDATE_EXPECT=1 cargo test` rewrites it between its markers.
#[test]
fn the_book_table_is_generated_from_the_instruction_table() {
    const BEGIN: &str = "<!-- isa-table:begin -->\n";
    const END: &str = "<!-- isa-table:end -->";
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("book/src/isa.md");
    let book = std::fs::read_to_string(&path).expect("book/src/isa.md is readable");
    let (Some(start), Some(end)) = (book.find(BEGIN), book.find(END)) else {
        panic!("book/src/isa.md lacks the table markers");
    };
    let start = start + BEGIN.len();
    let table = table::markdown_table();
    if book[start..end] != table {
        if std::env::var_os("UPDATE_EXPECT").is_some() {
            let updated = format!("{}{table}{}", &book[..start], &book[end..]);
            std::fs::write(&path, updated).expect("book/src/isa.md is writable");
        } else {
            panic!("book/src/isa.md's table is stale; rerun with UPDATE_EXPECT=1");
        }
    }
}
