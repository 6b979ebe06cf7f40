//! Exhaustive tests of the number formats: every FP8 code, every f16 input.

use super::fp8::NAN_CODE;
use super::*;
use crate::graph::DType;
use expect_test::{expect, Expect};
use half::f16;
use std::fmt::Write as _;

const FORMATS: [Fp8Format; 2] = [Fp8Format::F143, Fp8Format::F152];

/// Scales at which every code's real value is exactly representable in f16
/// (the largest value stays below 65504, the smallest at or above 2^-24).
fn exact_scales(format: Fp8Format) -> &'static [i8] {
    match format {
        Fp8Format::F143 => &[-14, -3, 0, 5, 8],
        Fp8Format::F152 => &[-7, -2, 0],
    }
}

fn check_table(format: Fp8Format, expected: Expect) {
    let table = format.decode_table();
    let mut out = String::new();
    for (row, values) in table.chunks(8).take(16).enumerate() {
        let _ = write!(out, "{:#04x}:", row * 8);
        for value in values {
            // f64 shows the exact binary value, f32 only the shortest repr.
            let _ = write!(out, " {}", f64::from(*value));
        }
        out.push('\n');
    }
    expected.assert_eq(&out);
}

#[test]
fn f143_value_table() {
    check_table(
        Fp8Format::F143,
        expect![[r#"
            0x00: 0 0.0009765625 0.001953125 0.0029296875 0.00390625 0.0048828125 0.005859375 0.0068359375
            0x08: 0.0078125 0.0087890625 0.009765625 0.0107421875 0.01171875 0.0126953125 0.013671875 0.0146484375
            0x10: 0.015625 0.017578125 0.01953125 0.021484375 0.0234375 0.025390625 0.02734375 0.029296875
            0x18: 0.03125 0.03515625 0.0390625 0.04296875 0.046875 0.05078125 0.0546875 0.05859375
            0x20: 0.0625 0.0703125 0.078125 0.0859375 0.09375 0.1015625 0.109375 0.1171875
            0x28: 0.125 0.140625 0.15625 0.171875 0.1875 0.203125 0.21875 0.234375
            0x30: 0.25 0.28125 0.3125 0.34375 0.375 0.40625 0.4375 0.46875
            0x38: 0.5 0.5625 0.625 0.6875 0.75 0.8125 0.875 0.9375
            0x40: 1 1.125 1.25 1.375 1.5 1.625 1.75 1.875
            0x48: 2 2.25 2.5 2.75 3 3.25 3.5 3.75
            0x50: 4 4.5 5 5.5 6 6.5 7 7.5
            0x58: 8 9 10 11 12 13 14 15
            0x60: 16 18 20 22 24 26 28 30
            0x68: 32 36 40 44 48 52 56 60
            0x70: 64 72 80 88 96 104 112 120
            0x78: 128 144 160 176 192 208 224 240
        "#]],
    );
}

#[test]
fn f152_value_table() {
    check_table(
        Fp8Format::F152,
        expect![[r#"
            0x00: 0 0.00000762939453125 0.0000152587890625 0.00002288818359375 0.000030517578125 0.00003814697265625 0.0000457763671875 0.00005340576171875
            0x08: 0.00006103515625 0.0000762939453125 0.000091552734375 0.0001068115234375 0.0001220703125 0.000152587890625 0.00018310546875 0.000213623046875
            0x10: 0.000244140625 0.00030517578125 0.0003662109375 0.00042724609375 0.00048828125 0.0006103515625 0.000732421875 0.0008544921875
            0x18: 0.0009765625 0.001220703125 0.00146484375 0.001708984375 0.001953125 0.00244140625 0.0029296875 0.00341796875
            0x20: 0.00390625 0.0048828125 0.005859375 0.0068359375 0.0078125 0.009765625 0.01171875 0.013671875
            0x28: 0.015625 0.01953125 0.0234375 0.02734375 0.03125 0.0390625 0.046875 0.0546875
            0x30: 0.0625 0.078125 0.09375 0.109375 0.125 0.15625 0.1875 0.21875
            0x38: 0.25 0.3125 0.375 0.4375 0.5 0.625 0.75 0.875
            0x40: 1 1.25 1.5 1.75 2 2.5 3 3.5
            0x48: 4 5 6 7 8 10 12 14
            0x50: 16 20 24 28 32 40 48 56
            0x58: 64 80 96 112 128 160 192 224
            0x60: 256 320 384 448 512 640 768 896
            0x68: 1024 1280 1536 1792 2048 2560 3072 3584
            0x70: 4096 5120 6144 7168 8192 10240 12288 14336
            0x78: 16384 20480 24576 28672 32768 40960 49152 57344
        "#]],
    );
}

#[test]
fn format_constants() {
    let out: Vec<String> = FORMATS
        .iter()
        .map(|f| {
            format!(
                "{f:?}: e{} m{} bias {} max {} min_subnormal 2^{}",
                f.exponent_bits(),
                f.mantissa_bits(),
                f.bias(),
                f.max_finite(),
                f.min_subnormal().log2()
            )
        })
        .collect();
    expect![[r#"
        F143: e4 m3 bias 8 max 240 min_subnormal 2^-10
        F152: e5 m2 bias 16 max 57344 min_subnormal 2^-17"#]]
    .assert_eq(&out.join("\n"));
}

#[test]
fn negative_codes_mirror_positive_ones_and_only_0x80_is_nan() {
    for format in FORMATS {
        let table = format.decode_table();
        for code in 0..=0x7Fu8 {
            assert!(table[usize::from(code)].is_finite(), "{format:?} {code:#x}");
            if code != 0 {
                assert_eq!(
                    table[usize::from(code | 0x80)],
                    -table[usize::from(code)],
                    "{format:?} {code:#x}"
                );
            }
        }
        assert!(table[usize::from(NAN_CODE)].is_nan());
        assert_eq!(table.iter().filter(|v| v.is_nan()).count(), 1);
    }
}

#[test]
fn codes_are_monotonic() {
    for format in FORMATS {
        let table = format.decode_table();
        for code in 0..0x7Fusize {
            assert!(table[code] < table[code + 1], "{format:?} {code:#x}");
        }
        for code in 0x81..0xFFusize {
            assert!(table[code] > table[code + 1], "{format:?} {code:#x}");
        }
    }
}

#[test]
fn every_code_round_trips_through_f16_at_several_scales() {
    for format in FORMATS {
        for &scale in exact_scales(format) {
            for code in 0..=0xFFu8 {
                if code == NAN_CODE {
                    continue;
                }
                let half = format.to_f16(code, scale);
                assert_eq!(
                    half.to_f32(),
                    format.to_f32(code, scale),
                    "{format:?} {code:#x} scale {scale}: f16 not exact"
                );
                assert_eq!(
                    format.encode_f16(half, scale),
                    code,
                    "{format:?} {code:#x} scale {scale}"
                );
            }
        }
    }
}

#[test]
fn midpoints_round_to_the_even_code() {
    let mut tested = 0;
    for format in FORMATS {
        for &scale in exact_scales(format) {
            for code in 0..0x7Fu8 {
                let low = format.to_f32(code, scale);
                let high = format.to_f32(code + 1, scale);
                let mid = f16::from_f32((low + high) / 2.0);
                if mid.to_f32() != (low + high) / 2.0 {
                    // At the smallest scales the first midpoints fall below
                    // f16's subnormals; the other scales cover those codes.
                    continue;
                }
                tested += 1;
                let even = if code % 2 == 0 { code } else { code + 1 };
                assert_eq!(format.encode_f16(mid, scale), even, "{format:?} {code:#x}");
                let below = f16::from_bits(mid.to_bits() - 1);
                let above = f16::from_bits(mid.to_bits() + 1);
                assert_eq!(format.encode_f16(below, scale), code);
                assert_eq!(format.encode_f16(above, scale), code + 1);
                let negative_even = if even == 0 { 0 } else { even | 0x80 };
                assert_eq!(format.encode_f16(-mid, scale), negative_even);
            }
        }
    }
    // Every pair at every scale but the few smallest midpoints.
    assert!(tested > 127 * 7, "only {tested} midpoints tested");
}

#[test]
fn out_of_range_values_saturate_and_nan_is_0x80() {
    let mut out = String::new();
    for format in FORMATS {
        for x in [
            f16::INFINITY,
            f16::NEG_INFINITY,
            f16::MAX,
            f16::MIN,
            f16::from_f32(248.0),
            f16::from_f32(-250.0),
            f16::from_f32(61440.0),
            f16::NAN,
            f16::NEG_ZERO,
            f16::from_f32(-1e-7),
        ] {
            let _ = writeln!(out, "{format:?} {x} -> {:#04x}", format.encode_f16(x, 0));
        }
    }
    expect![[r#"
        F143 inf -> 0x7f
        F143 -inf -> 0xff
        F143 65504 -> 0x7f
        F143 -65504 -> 0xff
        F143 248 -> 0x7f
        F143 -250 -> 0xff
        F143 61440 -> 0x7f
        F143 NaN -> 0x80
        F143 -0 -> 0x00
        F143 -0.00000011920929 -> 0x00
        F152 inf -> 0x7f
        F152 -inf -> 0xff
        F152 65504 -> 0x7f
        F152 -65504 -> 0xff
        F152 248 -> 0x60
        F152 -250 -> 0xe0
        F152 61440 -> 0x7f
        F152 NaN -> 0x80
        F152 -0 -> 0x00
        F152 -0.00000011920929 -> 0x00
    "#]]
    .assert_eq(&out);
}

#[test]
fn scale_shifts_the_grid() {
    // With scale -3 the real value 0.375 = 3 × 2^-3 is stored as the code of 3.
    let code = Fp8Format::F143.encode_f32(0.375, -3);
    assert_eq!(Fp8Format::F143.decode_table()[usize::from(code)], 3.0);
    assert_eq!(Fp8Format::F143.to_f32(code, -3), 0.375);
    // 1000 saturates at scale 0 but fits with scale 3 (1000 / 8 = 125 → 128).
    assert_eq!(Fp8Format::F143.quantize(1000.0, 0), 240.0);
    assert_eq!(Fp8Format::F143.quantize(1000.0, 3), 1024.0);
}

/// An independent f16 → FP8 cast: scan every code for the nearest real
/// value, ties to the even code, infinities to the largest code.
fn slow_encode_f16(format: Fp8Format, x: f16, scale: i8) -> u8 {
    let value = f64::from(x.to_f32());
    if value.is_nan() {
        return NAN_CODE;
    }
    if value.is_infinite() {
        return if value > 0.0 { 0x7F } else { 0xFF };
    }
    let mut best: Option<(f64, u8)> = None;
    for code in 0..=0xFFu8 {
        if code == NAN_CODE {
            continue;
        }
        let candidate = f64::from(format.to_f32(code, scale));
        let distance = (candidate - value).abs();
        best = match best {
            None => Some((distance, code)),
            Some((d, c)) if distance < d || (distance == d && code % 2 == 0 && c % 2 == 1) => {
                Some((distance, code))
            }
            keep => keep,
        };
    }
    best.map_or(NAN_CODE, |(_, code)| code)
}

#[test]
fn every_f16_casts_like_a_nearest_code_search() {
    for format in FORMATS {
        for scale in [-5i8, 0, 4] {
            for bits in 0..=u16::MAX {
                let x = f16::from_bits(bits);
                assert_eq!(
                    format.encode_f16(x, scale),
                    slow_encode_f16(format, x, scale),
                    "{format:?} scale {scale} input {x} ({bits:#06x})"
                );
            }
        }
    }
}

#[test]
fn f16_rounding_is_nearest_even() {
    let one_ulp = 2f32.powi(-10);
    assert_eq!(round_f16(1.0 + one_ulp / 2.0), 1.0);
    assert_eq!(round_f16(1.0 + 3.0 * one_ulp / 2.0), 1.0 + 2.0 * one_ulp);
    assert_eq!(round_f16(1.0 + one_ulp / 2.0 + 1e-6), 1.0 + one_ulp);
    assert_eq!(round_f16(65519.0), 65504.0);
    assert_eq!(round_f16(65520.0), f32::INFINITY);
    assert!(round_f16(f32::NAN).is_nan());
}

#[test]
fn device_encoding_round_trips() {
    let values = [0.5f32, -1.25, 3.0, 1000.0];
    let mut out = String::new();
    for (dtype, scale) in [
        (DType::F32, 0),
        (DType::F16, 0),
        (DType::F143, -2),
        (DType::F152, 1),
    ] {
        let bytes = encode(&values, dtype, scale);
        let back = decode(&bytes, dtype, scale);
        let rounded: Vec<f32> = values
            .iter()
            .map(|&v| round_to_dtype(v, dtype, scale))
            .collect();
        assert_eq!(back, rounded);
        let _ = writeln!(out, "{dtype} {bytes:02x?} -> {back:?}");
    }
    expect![[r#"
        f32 [00, 00, 00, 3f, 00, 00, a0, bf, 00, 00, 40, 40, 00, 00, 7a, 44] -> [0.5, -1.25, 3.0, 1000.0]
        f16 [00, 38, 00, bd, 00, 42, d0, 63] -> [0.5, -1.25, 3.0, 1000.0]
        f143 [48, d2, 5c, 7f] -> [0.5, -1.25, 3.0, 60.0]
        f152 [38, bd, 42, 64] -> [0.5, -1.25, 3.0, 1024.0]
    "#]].assert_eq(&out);
}

#[test]
fn erf_matches_known_values() {
    // Reference values from a 50-digit mpmath evaluation, rounded to f64.
    let known = [
        (0.0, 0.0),
        (1e-10, 1.1283791670955126e-10),
        (0.1, 0.1124629160182849),
        (0.5, 0.5204998778130465),
        (1.0, 0.8427007929497149),
        (2.0, 0.9953222650189527),
        (2.5, 0.999593047982555),
        (2.9999999, 0.9999779094890761),
        (3.0, 0.9999779095030014),
        (3.5, 0.9999992569016276),
        (5.0, 0.9999999999984626),
        (7.0, 1.0),
    ];
    for (x, expected) in known {
        let got = erf(x);
        assert!(
            (got - expected).abs() <= 2e-15,
            "erf({x}) = {got}, expected {expected}"
        );
        assert_eq!(erf(-x), -got);
    }
    assert!(erf(f64::NAN).is_nan());
    assert_eq!(erf(f64::INFINITY), 1.0);
}

/// The simulator executes FP8 conversions and `f32erf` with its own
/// implementation (`isa::fp8`), written apart from this module on purpose:
/// the host reference checks what the simulator computed, and a rounding
/// bug shared by both would pass every check. The two must agree bit for
/// bit on every f16 value, every code and several scales.
#[test]
fn the_simulator_and_the_reference_convert_fp8_alike() {
    use crate::isa::fp8::Fp8Format as Isa;
    for (format, isa) in [(Fp8Format::F143, Isa::F143), (Fp8Format::F152, Isa::F152)] {
        for scale in [-9i8, -3, 0, 4] {
            for bits in 0..=u16::MAX {
                let x = f16::from_bits(bits);
                assert_eq!(
                    format.encode_f16(x, scale),
                    isa.from_f16(x, i32::from(scale)),
                    "{format:?} encode {x} (0x{bits:04x}) at scale {scale}"
                );
            }
            for code in 0..=u8::MAX {
                let (ours, theirs) = (
                    format.to_f16(code, scale),
                    isa.to_f16(code, i32::from(scale)),
                );
                assert!(
                    ours.to_bits() == theirs.to_bits() || (ours.is_nan() && theirs.is_nan()),
                    "{format:?} decode 0x{code:02x} at scale {scale}: {ours} vs {theirs}"
                );
            }
        }
    }
    for i in -800..=800 {
        let x = f64::from(i) / 100.0;
        let (ours, theirs) = (erf(x), crate::isa::fp8::erf(x));
        assert!(
            (ours - theirs).abs() <= 4.0 * f64::EPSILON,
            "erf({x}): {ours} vs {theirs}"
        );
    }
}

#[test]
fn storing_a_held_value_keeps_it_for_every_code_and_scale() {
    // Every code at scales that put values past f16's range: storing the
    // code's value keeps it (a second cast through f16 would not), and a
    // value between two codes is rounded as the cast rounds.
    for format in FORMATS {
        let dtype = match format {
            Fp8Format::F143 => DType::F143,
            Fp8Format::F152 => DType::F152,
        };
        for scale in [-20i8, 0, 1, 10, 15] {
            for code in 0..=255u8 {
                let value = format.to_f32(code, scale);
                let stored = store_in_dtype(value, dtype, scale);
                assert!(
                    stored.to_bits() == value.to_bits() || value.is_nan() && stored.is_nan(),
                    "{format:?} code {code:#04x} scale {scale}: {value} stored as {stored}"
                );
            }
        }
    }
    // 65536 is an f152 code's value at scale 1, infinite through f16.
    assert_eq!(store_in_dtype(65536.0, DType::F152, 1), 65536.0);
    assert_eq!(round_to_dtype(65536.0, DType::F152, 1), 114688.0);
    // Not held: rounded as a cast (-0 to +0, a value between codes).
    assert_eq!(store_in_dtype(-0.0, DType::F143, 0).to_bits(), 0);
    assert_eq!(
        store_in_dtype(1.03, DType::F143, 0),
        round_to_dtype(1.03, DType::F143, 0)
    );
    assert_eq!(store_in_dtype(f32::INFINITY, DType::F152, 0), 57344.0);
}

#[test]
fn the_host_rounds_values_past_f16s_range_to_the_nearest_code() {
    // F152 with scale 3 holds up to 57344 * 8 = 458752: values past f16's
    // largest go to the nearest code rather than infinity and saturation.
    let format = Fp8Format::F152;
    let held = |x: f64| format.to_f32(format.encode_host(x, 3), 3);
    assert_eq!(held(65536.0), 65536.0);
    assert_eq!(held(70000.0), 65536.0);
    assert_eq!(held(-131072.0), -131072.0);
    assert_eq!(held(229376.0), 229376.0);
    assert_eq!(held(1e9), 458752.0);
    assert_eq!(held(f64::INFINITY), 458752.0);
    assert!(held(f64::NAN).is_nan());
    assert_eq!(host_round(70000.0, DType::F152, 3), 65536.0);
    // Within f16's range the host goes through f16 as the device's cast
    // does, at every code's value and between codes.
    for scale in [-4i8, 0, 3] {
        for bits in (0..=u16::MAX).step_by(7) {
            let x = f16::from_bits(bits).to_f32();
            if !x.is_finite() {
                continue;
            }
            for format in FORMATS {
                assert_eq!(
                    format.encode_host(f64::from(x), scale),
                    format.encode_f32(x, scale),
                    "{format:?} {x} scale {scale}"
                );
            }
        }
    }
}

#[test]
fn f64_values_round_to_f16_once() {
    let cases = [
        (1.0 + 2f64.powi(-11) + 2f64.powi(-40), 1.0 + 2f64.powi(-10)),
        (1.0 + 2f64.powi(-11) - 2f64.powi(-40), 1.0),
        (2f64.powi(-25) + 2f64.powi(-50), 2f64.powi(-24)),
        (-(2049.0 + 2f64.powi(-30)), -2050.0),
        (65520.0 - 2f64.powi(-30), 65504.0),
        (65520.0, f64::INFINITY),
        (1e300, f64::INFINITY),
        (-1e-300, -0.0),
    ];
    for (x, expected) in cases {
        let got = f16_from_f64(x).to_f64();
        assert!(
            got == expected && got.is_sign_negative() == expected.is_sign_negative(),
            "{x:e}: {got:e}, expected {expected:e}"
        );
    }
    // Near every tie of a spread of f16 values, the nearer neighbour.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..20_000 {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        let below = f16::from_bits((state >> 33) as u16 & 0x7bfe);
        let above = f16::from_bits(below.to_bits() + 1);
        let tie = (below.to_f64() + above.to_f64()) / 2.0;
        let nudge = tie.abs().max(1e-7) * 2f64.powi(-45) * ((state >> 20) % 64) as f64;
        for (x, nearer) in [(tie + nudge, above), (tie - nudge, below)] {
            let got = f16_from_f64(x);
            if nudge > 0.0 {
                assert_eq!(got.to_bits(), nearer.to_bits(), "{x:e}");
            }
        }
    }
}
