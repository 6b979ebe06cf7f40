//! NumPy `.npy` files, read and written here rather than through a crate:
//! the format is a magic string, a version, a header length, a Python
//! dict literal (`{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`)
//! and the raw data, and ipub needs only little-endian float arrays in C
//! order. (The maintained crates bring generic element machinery and
//! dependencies for the many dtypes ipub refuses anyway.)
//!
//! Versions 1.0 (16-bit header length), 2.0 and 3.0 (32-bit) are read; the
//! header is bounded by [`MAX_HEADER_BYTES`], and the data must be exactly
//! what the shape and dtype declare, which is checked before anything is
//! allocated for it. Dumps are written as version 1.0 f32 arrays.

use super::{Array, DataError, ElementType, Entry, FileFormat, TensorIndex, NPY_KEY};
use std::collections::BTreeMap;

/// The first six bytes of every `.npy` file.
pub(super) const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// The largest header read. NumPy writes a few hundred bytes; version 1.0
/// cannot declare more than 65535.
pub(super) const MAX_HEADER_BYTES: usize = 1 << 20;

/// Most dimensions an array may declare (ipub's tensors have at most 8).
pub(super) const MAX_DIMENSIONS: usize = 32;

fn bad(message: impl Into<String>) -> DataError {
    DataError::Npy(message.into())
}

/// The index of an `.npy` file's bytes: one entry under [`NPY_KEY`].
pub(super) fn index(bytes: &[u8]) -> Result<TensorIndex, DataError> {
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err(bad("it does not start with the .npy magic bytes"));
    }
    let (major, minor) = (bytes[6], bytes[7]);
    let (length, start) = match major {
        1 => (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        2 | 3 => return Err(bad("the file ends inside its header length")),
        _ => {
            return Err(bad(format!(
                "format version {major}.{minor} is not one ipub reads (1.0, 2.0 or 3.0)"
            )))
        }
    };
    if length > MAX_HEADER_BYTES {
        return Err(bad(format!(
            "its header declares {length} bytes, more than the limit of {MAX_HEADER_BYTES}"
        )));
    }
    let end = start + length;
    let Some(header) = bytes.get(start..end) else {
        return Err(bad(format!(
            "its header declares {length} bytes but the file ends after {}",
            bytes.len() - start
        )));
    };
    let header = std::str::from_utf8(header).map_err(|_| bad("its header is not text"))?;
    let fields = parse_dict(header)?;
    let descr = match fields.get("descr") {
        Some(Value::Str(d)) => d.as_str(),
        _ => return Err(bad("its header has no `descr` string")),
    };
    let dtype = element_type(descr);
    match fields.get("fortran_order") {
        Some(Value::Bool(false)) => {}
        Some(Value::Bool(true)) => {
            return Err(bad(
                "the array is stored in Fortran (column-major) order; save `np.ascontiguousarray(a)` instead",
            ))
        }
        _ => return Err(bad("its header has no `fortran_order` flag")),
    }
    let shape = match fields.get("shape") {
        Some(Value::Shape(shape)) => shape.clone(),
        _ => return Err(bad("its header has no `shape` tuple")),
    };
    let data = bytes.len() - end;
    if let ElementType::Unsupported(_) = dtype {
        // The size of an unsupported element is unknown; the entry is kept
        // so that using it says which dtype it is.
    } else {
        let declared = shape
            .iter()
            .try_fold(dtype.size_bytes(), |n, &d| n.checked_mul(d))
            .ok_or_else(|| {
                bad(format!(
                    "its shape {shape:?} has more bytes than can be counted"
                ))
            })?;
        if declared != data {
            return Err(bad(format!(
                "its shape {shape:?} of {} needs {declared} bytes of data, but the file has {data}",
                dtype.name()
            )));
        }
    }
    let entry = Entry {
        dtype,
        shape,
        bytes: end..bytes.len(),
    };
    Ok(TensorIndex {
        format: FileFormat::Npy,
        entries: BTreeMap::from([(NPY_KEY.to_string(), entry)]),
    })
}

/// The element type of a NumPy type string. `|` (not applicable) and `<`
/// (little-endian) orders are read; `=` is native, little-endian on every
/// machine ipub runs on.
fn element_type(descr: &str) -> ElementType {
    match descr {
        "<f8" | "=f8" => ElementType::F64,
        "<f4" | "=f4" => ElementType::F32,
        "<f2" | "=f2" => ElementType::F16,
        other => ElementType::Unsupported(format!("numpy `{other}`")),
    }
}

#[derive(Debug, PartialEq)]
enum Value {
    Str(String),
    Bool(bool),
    Shape(Vec<usize>),
}

/// Parses the header's dict literal: string keys, and string, boolean or
/// integer-tuple values.
fn parse_dict(text: &str) -> Result<BTreeMap<String, Value>, DataError> {
    let mut p = Parser {
        text: text.as_bytes(),
        at: 0,
    };
    let mut fields = BTreeMap::new();
    p.expect(b'{')?;
    loop {
        p.skip_space();
        if p.eat(b'}') {
            break;
        }
        let key = p.string()?;
        p.expect(b':')?;
        let value = p.value()?;
        fields.insert(key, value);
        p.skip_space();
        if !p.eat(b',') {
            p.expect(b'}')?;
            break;
        }
    }
    p.skip_space();
    if p.at != p.text.len() {
        return Err(bad("its header has text after the dict"));
    }
    Ok(fields)
}

struct Parser<'a> {
    text: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn skip_space(&mut self) {
        while self.text.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.skip_space();
        if self.text.get(self.at) == Some(&c) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: u8) -> Result<(), DataError> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(bad(format!(
                "its header is not a dict literal (expected `{}` at byte {})",
                c as char, self.at
            )))
        }
    }

    fn string(&mut self) -> Result<String, DataError> {
        self.skip_space();
        let quote = match self.text.get(self.at) {
            Some(&q @ (b'\'' | b'"')) => q,
            _ => return Err(bad(format!("expected a string at byte {}", self.at))),
        };
        let start = self.at + 1;
        let length = self.text[start..]
            .iter()
            .position(|&c| c == quote)
            .ok_or_else(|| bad("its header has an unterminated string"))?;
        self.at = start + length + 1;
        Ok(String::from_utf8_lossy(&self.text[start..start + length]).into_owned())
    }

    fn value(&mut self) -> Result<Value, DataError> {
        self.skip_space();
        let rest = &self.text[self.at..];
        if rest.starts_with(b"True") {
            self.at += 4;
            return Ok(Value::Bool(true));
        }
        if rest.starts_with(b"False") {
            self.at += 5;
            return Ok(Value::Bool(false));
        }
        if self.eat(b'(') {
            let mut shape = Vec::new();
            loop {
                self.skip_space();
                if self.eat(b')') {
                    break;
                }
                let start = self.at;
                while self.text.get(self.at).is_some_and(u8::is_ascii_digit) {
                    self.at += 1;
                }
                let digits = std::str::from_utf8(&self.text[start..self.at]).unwrap_or("");
                let dimension = digits
                    .parse::<usize>()
                    .map_err(|_| bad(format!("its shape has a bad dimension at byte {start}")))?;
                shape.push(dimension);
                if shape.len() > MAX_DIMENSIONS {
                    return Err(bad(format!(
                        "its shape has more than {MAX_DIMENSIONS} dimensions"
                    )));
                }
                if !self.eat(b',') {
                    self.expect(b')')?;
                    break;
                }
            }
            return Ok(Value::Shape(shape));
        }
        self.string().map(Value::Str)
    }
}

/// A version 1.0 `.npy` file of one f32 array (little-endian, C order).
pub fn write_f32(array: &Array<'_>) -> Vec<u8> {
    let dims: Vec<String> = array.shape.iter().map(usize::to_string).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
    // NumPy pads the header with spaces and a newline so that the data
    // starts at a multiple of 64 bytes.
    let unpadded = MAGIC.len() + 2 + 2 + header.len() + 1;
    header.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + 4 * array.values.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for v in array.values {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}
