//! Action results as the Bazel remote-cache protocol stores them: the
//! `ActionResult` message of the Remote Execution API, reduced to what ipub
//! writes (output files, each a path and the SHA-256 digest and size of a
//! blob in the content-addressed store).
//!
//! Servers may do more than store the bytes: bazel-remote parses every
//! uploaded action result, refuses one that does not parse, and writes it
//! back with its own execution metadata added. So the encoding is real
//! protobuf, and the decoder skips fields it does not know. Decoding is
//! bounded: the message's size is limited by the caller, and at most
//! [`MAX_OUTPUTS`] output files are read.

/// The most output files an action result may list (ipub writes two).
pub(super) const MAX_OUTPUTS: usize = 16;

/// One output file: its name in the action and its blob's digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct OutputFile {
    pub path: String,
    /// 64 lowercase hex digits.
    pub sha256: String,
    pub size: u64,
}

/// Why an action result could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(super) enum ActionError {
    #[error("the action result is truncated")]
    Truncated,
    #[error("the action result uses protobuf wire type {0}, which no field of it has")]
    WireType(u64),
    #[error("the action result lists more than {MAX_OUTPUTS} output files")]
    TooManyOutputs,
    #[error("an output file has no path or no valid digest")]
    BadOutput,
}

// Field numbers of the Remote Execution API's messages.
const ACTION_RESULT_OUTPUT_FILES: u64 = 2;
const OUTPUT_FILE_PATH: u64 = 1;
const OUTPUT_FILE_DIGEST: u64 = 2;
const DIGEST_HASH: u64 = 1;
const DIGEST_SIZE_BYTES: u64 = 2;

const VARINT: u64 = 0;
const FIXED64: u64 = 1;
const LENGTH_DELIMITED: u64 = 2;
const FIXED32: u64 = 5;

/// The `ActionResult` listing `outputs`.
pub(super) fn encode(outputs: &[OutputFile]) -> Vec<u8> {
    let mut message = Vec::new();
    for output in outputs {
        let mut digest = Vec::new();
        put_bytes(&mut digest, DIGEST_HASH, output.sha256.as_bytes());
        put_varint_field(&mut digest, DIGEST_SIZE_BYTES, output.size);
        let mut file = Vec::new();
        put_bytes(&mut file, OUTPUT_FILE_PATH, output.path.as_bytes());
        put_bytes(&mut file, OUTPUT_FILE_DIGEST, &digest);
        put_bytes(&mut message, ACTION_RESULT_OUTPUT_FILES, &file);
    }
    message
}

/// The output files an `ActionResult` lists; other fields are skipped.
pub(super) fn decode(bytes: &[u8]) -> Result<Vec<OutputFile>, ActionError> {
    let mut outputs = Vec::new();
    for field in Fields(bytes) {
        let (number, value) = field?;
        if number != ACTION_RESULT_OUTPUT_FILES {
            continue;
        }
        let Value::Bytes(file) = value else {
            return Err(ActionError::BadOutput);
        };
        if outputs.len() == MAX_OUTPUTS {
            return Err(ActionError::TooManyOutputs);
        }
        outputs.push(output_file(file)?);
    }
    Ok(outputs)
}

fn output_file(bytes: &[u8]) -> Result<OutputFile, ActionError> {
    let (mut path, mut hash, mut size) = (None, None, 0);
    for field in Fields(bytes) {
        match field? {
            (OUTPUT_FILE_PATH, Value::Bytes(text)) => {
                path = Some(String::from_utf8(text.to_vec()).map_err(|_| ActionError::BadOutput)?)
            }
            (OUTPUT_FILE_DIGEST, Value::Bytes(digest)) => {
                for field in Fields(digest) {
                    match field? {
                        (DIGEST_HASH, Value::Bytes(text)) => hash = Some(text),
                        (DIGEST_SIZE_BYTES, Value::Varint(n)) => size = n,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    let hash = hash.ok_or(ActionError::BadOutput)?;
    let hex = |b: &u8| b.is_ascii_digit() || (b'a'..=b'f').contains(b);
    if hash.len() != 64 || !hash.iter().all(hex) {
        return Err(ActionError::BadOutput);
    }
    Ok(OutputFile {
        path: path
            .filter(|p| !p.is_empty())
            .ok_or(ActionError::BadOutput)?,
        sha256: String::from_utf8(hash.to_vec()).map_err(|_| ActionError::BadOutput)?,
        size,
    })
}

enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

/// The fields of one message, in order.
struct Fields<'a>(&'a [u8]);

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u64, Value<'a>), ActionError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.0.is_empty() {
            return None;
        }
        let field = (|| {
            let tag = varint(&mut self.0)?;
            let value = match tag & 7 {
                VARINT => Value::Varint(varint(&mut self.0)?),
                LENGTH_DELIMITED => {
                    let len = usize::try_from(varint(&mut self.0)?)
                        .map_err(|_| ActionError::Truncated)?;
                    let bytes = self.0.get(..len).ok_or(ActionError::Truncated)?;
                    self.0 = &self.0[len..];
                    Value::Bytes(bytes)
                }
                FIXED64 => {
                    self.0 = self.0.get(8..).ok_or(ActionError::Truncated)?;
                    Value::Fixed
                }
                FIXED32 => {
                    self.0 = self.0.get(4..).ok_or(ActionError::Truncated)?;
                    Value::Fixed
                }
                other => return Err(ActionError::WireType(other)),
            };
            Ok((tag >> 3, value))
        })();
        if field.is_err() {
            // Nothing after a malformed field can be read.
            self.0 = &[];
        }
        Some(field)
    }
}

fn varint(bytes: &mut &[u8]) -> Result<u64, ActionError> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = bytes.split_first().ok_or(ActionError::Truncated)?;
        *bytes = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(ActionError::Truncated)
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn put_varint_field(out: &mut Vec<u8>, number: u64, value: u64) {
    put_varint(out, number << 3 | VARINT);
    put_varint(out, value);
}

fn put_bytes(out: &mut Vec<u8>, number: u64, bytes: &[u8]) {
    put_varint(out, number << 3 | LENGTH_DELIMITED);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::expect;

    fn outputs() -> Vec<OutputFile> {
        vec![
            OutputFile {
                path: "kernel.o".into(),
                sha256: "ab".repeat(32),
                size: 300,
            },
            OutputFile {
                path: "kernel.json".into(),
                sha256: "cd".repeat(32),
                size: 0,
            },
        ]
    }

    #[test]
    fn round_trips_and_skips_fields_servers_add() {
        let bytes = encode(&outputs());
        assert_eq!(decode(&bytes), Ok(outputs()));
        // What bazel-remote writes back: the same message with
        // execution_metadata (field 9) naming the worker, an exit code and
        // a fixed-width field of a later version.
        let mut served = bytes.clone();
        put_bytes(&mut served, 9, b"\x0a\x09127.0.0.1");
        put_varint_field(&mut served, 4, 0);
        put_varint(&mut served, (20 << 3) | FIXED64);
        served.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(decode(&served), Ok(outputs()));
        // The bytes pinned, so a change of encoding is seen in review.
        expect!["12510a086b65726e656c2e6f12450a406162616261626162616261626162616261626162616261626162616261626162616261626162616261626162616261626162616261626162616261626162616210ac"]
            .assert_eq(&bytes[..82].iter().map(|b| format!("{b:02x}")).collect::<String>());
    }

    /// Whatever a server sends back, decoding returns: seeded mutations
    /// (bytes changed, inserted, removed, the message cut) of a real
    /// result, and every output it accepts is well formed.
    #[test]
    fn mutated_results_decode_or_fail_without_panicking() {
        let original = encode(&outputs());
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..20_000 {
            let mut bytes = original.clone();
            for _ in 0..=next() % 4 {
                let at = (next() as usize) % (bytes.len() + 1);
                match next() % 4 {
                    0 if at < bytes.len() => bytes[at] = next() as u8,
                    1 => bytes.insert(at, next() as u8),
                    2 if at < bytes.len() => {
                        bytes.remove(at);
                    }
                    _ => bytes.truncate(at),
                }
            }
            if let Ok(decoded) = decode(&bytes) {
                assert!(decoded.len() <= MAX_OUTPUTS);
                for output in decoded {
                    assert!(!output.path.is_empty());
                    assert_eq!(output.sha256.len(), 64);
                }
            }
        }
    }

    #[test]
    fn malformed_results_are_errors() {
        let bytes = encode(&outputs());
        for cut in [1, 10, bytes.len() - 1] {
            assert_eq!(
                decode(&bytes[..cut]),
                Err(ActionError::Truncated),
                "cut {cut}"
            );
        }
        assert_eq!(decode(&[(1 << 3) | 3]), Err(ActionError::WireType(3)));
        assert_eq!(decode(&[0xff; 11]), Err(ActionError::Truncated));
        let mut short = outputs();
        short[0].sha256.truncate(10);
        assert_eq!(decode(&encode(&short)), Err(ActionError::BadOutput));
        let many: Vec<OutputFile> = (0..=MAX_OUTPUTS).map(|_| outputs()[0].clone()).collect();
        assert_eq!(decode(&encode(&many)), Err(ActionError::TooManyOutputs));
        // Text is no message: `n` (0x6e) is field 13 of wire type 6.
        assert_eq!(
            decode(b"not a protobuf message at all"),
            Err(ActionError::WireType(6))
        );
    }
}
