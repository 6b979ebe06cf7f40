//! Tensor files: round trips, conversions and hostile files.

use super::*;
use crate::graph::DType;
use expect_test::{expect, Expect};

/// A safetensors file written by the crate from `(name, dtype, shape, bytes)`.
fn safetensors_file(tensors: &[(&str, ::safetensors::Dtype, Vec<usize>, Vec<u8>)]) -> Vec<u8> {
    let views: Vec<(String, ::safetensors::tensor::TensorView<'_>)> = tensors
        .iter()
        .map(|(name, dtype, shape, bytes)| {
            let view =
                ::safetensors::tensor::TensorView::new(*dtype, shape.clone(), bytes).expect("view");
            (name.to_string(), view)
        })
        .collect();
    ::safetensors::serialize(views, None).expect("serialize")
}

/// The index of `bytes` read as a file named `path`, or the error.
fn check_index(path: &str, bytes: &[u8], expected: Expect) {
    let text = match index(path, bytes) {
        Ok(index) => index
            .entries
            .iter()
            .map(|(k, e)| format!("{k:?}: {} {:?} at {:?}", e.dtype.name(), e.shape, e.bytes))
            .collect::<Vec<_>>()
            .join("\n"),
        Err(error) => format!("error: {error}"),
    };
    expected.assert_eq(&text);
}

#[test]
fn safetensors_files_are_indexed_by_key() {
    let f32s: Vec<u8> = [1.0f32, -2.0, 3.5, 0.25]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let file = safetensors_file(&[
        ("layers.0.w", ::safetensors::Dtype::F32, vec![2, 2], f32s),
        ("ids", ::safetensors::Dtype::I64, vec![1], vec![0; 8]),
        ("b", ::safetensors::Dtype::BF16, vec![3], vec![0; 6]),
    ]);
    check_index(
        "m.safetensors",
        &file,
        expect![[r#"
            "b": bf16 [3] at 216..222
            "ids": I64 [1] at 192..200
            "layers.0.w": f32 [2, 2] at 200..216"#]],
    );
    check_index(
        "m.bin",
        &file,
        expect!["error: the file name does not say its format: tensor files end in `.safetensors` or `.npy`"],
    );
}

#[test]
fn hostile_safetensors_files_are_refused_without_allocating() {
    let good = safetensors_file(&[("w", ::safetensors::Dtype::F16, vec![4], vec![0; 8])]);
    let check = |bytes: &[u8], expected: Expect| check_index("x.safetensors", bytes, expected);
    check(&good[..good.len() - 1], expect!["error: it is not a valid safetensors file: incomplete metadata, file not fully covered"]);
    check(
        &good[..5],
        expect!["error: it is not a valid safetensors file: header too small"],
    );
    check(
        b"",
        expect!["error: it is not a valid safetensors file: header too small"],
    );
    // A header length of 2^63 and one just past the file.
    let mut huge = good.clone();
    huge[..8].copy_from_slice(&(1u64 << 63).to_le_bytes());
    check(
        &huge,
        expect!["error: it is not a valid safetensors file: header too large"],
    );
    let mut long = good.clone();
    long[..8].copy_from_slice(&(good.len() as u64).to_le_bytes());
    check(
        &long,
        expect!["error: it is not a valid safetensors file: invalid header length"],
    );
    // Garbage where the JSON header should be.
    let mut garbled = good.clone();
    garbled[8] = b'[';
    check(
        &garbled,
        expect!["error: it is not a valid safetensors file: invalid JSON in header: invalid type: sequence, expected struct HashMetadata at line 1 column 0"],
    );
    // A tensor that declares a huge shape over the bytes present.
    let header = r#"{"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}}"#;
    let mut declared = (header.len() as u64).to_le_bytes().to_vec();
    declared.extend_from_slice(header.as_bytes());
    declared.extend_from_slice(&[0; 8]);
    check(&declared, expect!["error: it is not a valid safetensors file: overflow computing buffer size from shape and/or element type"]);
    let header = r#"{"w":{"dtype":"F32","shape":[1000000],"data_offsets":[0,4000000]}}"#;
    let mut declared = (header.len() as u64).to_le_bytes().to_vec();
    declared.extend_from_slice(header.as_bytes());
    declared.extend_from_slice(&[0; 8]);
    check(&declared, expect!["error: it is not a valid safetensors file: incomplete metadata, file not fully covered"]);
}

#[test]
fn npy_files_round_trip_and_report_their_array() {
    let values = [1.0f32, 2.0, -0.5, 8.0, 0.0, 3.0];
    let file = npy::write_f32(&Array {
        name: "x",
        shape: &[2, 3],
        values: &values,
    });
    assert_eq!((file.len() - 4 * values.len()) % 64, 0);
    check_index("x.npy", &file, expect![[r#""": f32 [2, 3] at 128..152"#]]);
    let index = index("x.npy", &file).expect("index");
    let converted =
        device_bytes(index.get(NPY_KEY).expect("entry"), &file, DType::F32, 0).expect("converts");
    assert_eq!(
        crate::numerics::decode(&converted.bytes, DType::F32, 0),
        values
    );
    let vector = npy::write_f32(&Array {
        name: "v",
        shape: &[3],
        values: &values[..3],
    });
    check_index("v.npy", &vector, expect![[r#""": f32 [3] at 128..140"#]]);
}

/// An `.npy` file with `header` (padded) and `data`.
fn npy_file(header: &str, data: &[u8]) -> Vec<u8> {
    let mut file = npy::MAGIC.to_vec();
    file.extend_from_slice(&[1, 0]);
    file.extend_from_slice(&(header.len() as u16).to_le_bytes());
    file.extend_from_slice(header.as_bytes());
    file.extend_from_slice(data);
    file
}

#[test]
fn hostile_npy_files_are_refused() {
    let check = |bytes: &[u8], expected: Expect| check_index("x.npy", bytes, expected);
    let good = "{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }\n";
    check(
        &npy_file(good, &[0; 4]),
        expect![[r#""": f16 [2] at 68..72"#]],
    );
    check(&npy_file(good, &[0; 3]), expect!["error: it is not a valid .npy file: its shape [2] of f16 needs 4 bytes of data, but the file has 3"]);
    check(
        b"PK\x03\x04",
        expect!["error: it is not a valid .npy file: it does not start with the .npy magic bytes"],
    );
    let mut truncated = npy_file(good, &[]);
    truncated.truncate(30);
    check(&truncated, expect!["error: it is not a valid .npy file: its header declares 58 bytes but the file ends after 20"]);
    check(
        &npy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", &[0; 16]),
        expect!["error: it is not a valid .npy file: the array is stored in Fortran (column-major) order; save `np.ascontiguousarray(a)` instead"],
    );
    check(
        &npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999, 99999999999), }", &[0; 16]),
        expect!["error: it is not a valid .npy file: its shape [99999999999, 99999999999, 99999999999] has more bytes than can be counted"],
    );
    check(
        &npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000,), }", &[0; 16]),
        expect!["error: it is not a valid .npy file: its shape [1000000000] of f32 needs 4000000000 bytes of data, but the file has 16"],
    );
    check(
        &npy_file(
            "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }",
            &[0; 4],
        ),
        expect![[r#""": numpy `>f4` [1] at 67..71"#]],
    );
    check(
        &npy_file("{'descr': '<f4', 'shape': (1,), 'fortran_order': False", &[0; 4]),
        expect!["error: it is not a valid .npy file: its header is not a dict literal (expected `}` at byte 54)"],
    );
    let mut version = npy_file(good, &[0; 4]);
    version[6] = 9;
    check(&version, expect!["error: it is not a valid .npy file: format version 9.0 is not one ipub reads (1.0, 2.0 or 3.0)"]);
    let mut huge = npy::MAGIC.to_vec();
    huge.extend_from_slice(&[2, 0]);
    huge.extend_from_slice(&u32::MAX.to_le_bytes());
    check(&huge, expect!["error: it is not a valid .npy file: its header declares 4294967295 bytes, more than the limit of 1048576"]);
}

/// Converts `values` stored as `from` to `dtype` with `scale`, and shows the
/// device values with the NaN and overflow counts.
fn check_conversion(
    from: ::safetensors::Dtype,
    values: &[f64],
    dtype: DType,
    scale: i8,
    expected: Expect,
) {
    let bytes: Vec<u8> = values
        .iter()
        .flat_map(|&v| match from {
            ::safetensors::Dtype::F64 => v.to_le_bytes().to_vec(),
            ::safetensors::Dtype::F32 => (v as f32).to_le_bytes().to_vec(),
            ::safetensors::Dtype::F16 => half::f16::from_f64(v).to_le_bytes().to_vec(),
            _ => half::bf16::from_f64(v).to_le_bytes().to_vec(),
        })
        .collect();
    let file = safetensors_file(&[("t", from, vec![values.len()], bytes)]);
    let index = index("t.safetensors", &file).expect("index");
    let converted =
        device_bytes(index.get("t").expect("entry"), &file, dtype, scale).expect("converts");
    let shown: Vec<String> = crate::numerics::decode(&converted.bytes, dtype, scale)
        .iter()
        .map(f32::to_string)
        .collect();
    expected.assert_eq(&format!(
        "{} (nans {}, overflows {})",
        shown.join(" "),
        converted.nans,
        converted.overflows
    ));
}

#[test]
fn conversions_round_to_nearest_even_and_count_what_does_not_fit() {
    use ::safetensors::Dtype;
    // 1 + 2^-11 is a tie between two f16 values: it goes to the even one;
    // 1 + 3 * 2^-11 goes up.
    let ties = [
        1.0 + 2f64.powi(-11),
        1.0 + 3.0 * 2f64.powi(-11),
        1e6,
        f64::NAN,
    ];
    check_conversion(
        Dtype::F64,
        &ties,
        DType::F16,
        0,
        expect!["1 1.0019531 inf NaN (nans 1, overflows 1)"],
    );
    check_conversion(
        Dtype::F32,
        &ties,
        DType::F32,
        0,
        expect!["1.0004883 1.0014648 1000000 NaN (nans 1, overflows 0)"],
    );
    check_conversion(
        Dtype::BF16,
        &[1.5, -3.0, 1e30],
        DType::F16,
        0,
        expect!["1.5 -3 inf (nans 0, overflows 1)"],
    );
    // FP8 through f16 with the scale: 0.3 is stored as 0.3 * 2^2 = 1.2,
    // which rounds to 1.25, read back as 0.3125; 100 saturates at 240 * 2^-2.
    check_conversion(
        Dtype::F16,
        &[0.3, 100.0, -0.0001],
        DType::F143,
        -2,
        expect!["0.3125 60 0 (nans 0, overflows 1)"],
    );
    check_conversion(
        Dtype::F32,
        &[f64::NAN, 2.0],
        DType::F152,
        0,
        expect!["NaN 2 (nans 1, overflows 0)"],
    );
    // F152 with scale 3 holds up to 458752: values past f16's range go to
    // the nearest code (70000 to 65536), and only those past the largest
    // code overflow.
    check_conversion(
        Dtype::F64,
        &[65504.0, 70000.0, 131072.0, 229376.0, 1e6],
        DType::F152,
        3,
        expect!["65536 65536 131072 229376 458752 (nans 0, overflows 1)"],
    );
}

#[test]
fn iteration_keys_and_near_keys() {
    assert_eq!(
        iteration_key("layers.{i}.fc1.weight", Some(7)),
        "layers.7.fc1.weight"
    );
    assert_eq!(
        iteration_key("layers.{i}.fc1.weight", None),
        "layers.{i}.fc1.weight"
    );
    let file = safetensors_file(&[
        (
            "layers.0.fc1.weight",
            ::safetensors::Dtype::F16,
            vec![1],
            vec![0; 2],
        ),
        (
            "layers.0.fc2.weight",
            ::safetensors::Dtype::F16,
            vec![1],
            vec![0; 2],
        ),
        (
            "head.weight",
            ::safetensors::Dtype::F16,
            vec![1],
            vec![0; 2],
        ),
    ]);
    let index = index("m.safetensors", &file).expect("index");
    assert_eq!(
        index.near_keys("layers.0.fc3.weight", 5),
        ["layers.0.fc1.weight", "layers.0.fc2.weight"]
    );
    assert_eq!(
        index.near_keys("layers.0.fc1.weight", 1),
        ["layers.0.fc1.weight"]
    );
}
