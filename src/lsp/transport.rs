//! The client's side of the stdio transport: `Content-Length` framing read
//! by hand, so that no header, however wrong, costs more memory than
//! [`MAX_MESSAGE_BYTES`] or the messages after it.
//!
//! lsp-server's own reader sizes its buffer from the header before reading
//! a byte (a `Content-Length` of 10^14 aborted the process) and, after one
//! bad header, reads every later body as a header line. Here a header
//! block is a run of lines ending in an empty line, with `\r\n` or `\n`
//! endings; a block without `Content-Length` is skipped, a body that is
//! not JSON is searched for the next `Content-Length:` (a wrong length
//! swallows the start of the next message), and a body over the limit is
//! read as header lines up to the next `Content-Length:`, so that a length
//! however wrong loses no later message.

use lsp_server::{ErrorCode, Message, Notification, Request, RequestId, Response, ResponseError};
use serde_json::Value;
use std::io::{self, BufRead, Read, Write};

/// The largest message read: four times the largest source file
/// ([`crate::vfs::MAX_SOURCE_FILE_BYTES`]), so that a source at the limit
/// (which is then refused with the same error as `ipub check` gives)
/// still arrives when JSON escapes one byte in three of it. A larger body
/// is skipped unread, up to the next header.
pub(crate) const MAX_MESSAGE_BYTES: u64 = 4 * crate::vfs::MAX_SOURCE_FILE_BYTES;

/// The longest header line kept: longer lines (a body that lost its
/// header) are kept only by their end, where the next header starts.
const MAX_HEADER_LINE: usize = 4096;

/// How much of a bad message a log line quotes.
const QUOTED: usize = 240;

/// The header that frames a message, lower case.
const CONTENT_LENGTH: &[u8] = b"content-length:";

/// What the server gets from the client.
#[derive(Debug)]
pub(crate) enum Incoming {
    Message(Message),
    /// A request the server cannot take (not JSON-RPC 2.0, or not a
    /// request of the protocol's shape), with the error to answer it with.
    Refused(Response),
    /// A message with an `id` that is neither a number nor a string: its
    /// error, answered with a null id as JSON-RPC 2.0 asks when the id
    /// cannot be read.
    RefusedWithoutId(ResponseError),
}

/// What the server writes to the client.
#[derive(Debug)]
pub(crate) enum Outgoing {
    Message(Message),
    /// An error response whose id is `null` (lsp-server's responses
    /// carry a number or a string).
    NullIdError(ResponseError),
}

impl Outgoing {
    /// Writes the message framed with its `Content-Length`.
    pub(crate) fn write(self, out: &mut impl Write) -> io::Result<()> {
        match self {
            Outgoing::Message(message) => message.write(out),
            Outgoing::NullIdError(error) => {
                let body = serde_json::json!({ "jsonrpc": "2.0", "id": null, "error": error });
                let body = body.to_string();
                write!(out, "Content-Length: {}\r\n\r\n{body}", body.len())?;
                out.flush()
            }
        }
    }
}

/// Frames messages from `input`: [`Framed::next`] is the next JSON body,
/// past anything that could not be read.
pub(crate) struct Framed<R> {
    input: Rewound<R>,
}

impl<R: BufRead> Framed<R> {
    pub(crate) fn new(input: R) -> Framed<R> {
        Framed {
            input: Rewound {
                again: Vec::new(),
                inner: input,
            },
        }
    }

    /// The next body that is JSON, or `None` at the end of the input.
    pub(crate) fn next(&mut self) -> io::Result<Option<Value>> {
        loop {
            let Some(length) = self.header()? else {
                return Ok(None);
            };
            if length > MAX_MESSAGE_BYTES {
                // Not read by its length, which may be absurd (10^14) and
                // would swallow every later message: the body is read as
                // header lines (each kept by its last bytes alone) until
                // the next `Content-Length`.
                tracing::warn!(
                    length,
                    limit = MAX_MESSAGE_BYTES,
                    "skipping a message longer than the limit"
                );
                continue;
            }
            let mut body = Vec::new();
            (&mut self.input).take(length).read_to_end(&mut body)?;
            match serde_json::from_slice(&body) {
                Ok(value) => return Ok(Some(value)),
                Err(error) => {
                    tracing::warn!(
                        %error,
                        body = %quote(&body),
                        "skipped a message that is not JSON"
                    );
                    self.resync(&body);
                }
            }
        }
    }

    /// Reads header blocks until one has a `Content-Length`; returns it.
    fn header(&mut self) -> io::Result<Option<u64>> {
        let mut length = None;
        let mut junk = false;
        loop {
            let Some(line) = self.line()? else {
                return Ok(None);
            };
            if line.is_empty() {
                match length {
                    Some(Some(length)) => return Ok(Some(length)),
                    Some(None) => tracing::warn!("skipped a message with a bad Content-Length"),
                    None if junk => tracing::warn!("skipped a header without Content-Length"),
                    // Blank lines between messages.
                    None => {}
                }
                (length, junk) = (None, false);
                continue;
            }
            match content_length(&line) {
                Some(value) => length = Some(value),
                None => junk = true,
            }
        }
    }

    /// One line without its ending, at most [`MAX_HEADER_LINE`] bytes of
    /// its end; `None` at the end of the input.
    fn line(&mut self) -> io::Result<Option<Vec<u8>>> {
        let mut line = Vec::new();
        loop {
            let available = self.input.fill_buf()?;
            if available.is_empty() {
                return Ok((!line.is_empty()).then_some(line));
            }
            let (taken, ended) = match available.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (available.len(), false),
            };
            line.extend_from_slice(&available[..taken]);
            self.input.consume(taken);
            if line.len() > MAX_HEADER_LINE {
                line.drain(..line.len() - MAX_HEADER_LINE);
            }
            if ended {
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                return Ok(Some(line));
            }
        }
    }

    /// After a body that is not JSON: the next `Content-Length:` in it
    /// (past its start) and what follows are read again as the next
    /// header: the first one, as a length too long swallows the messages
    /// after it whole.
    fn resync(&mut self, body: &[u8]) {
        if let Some(at) = content_lengths(body.get(1..).unwrap_or_default()).next() {
            self.input
                .again
                .splice(0..0, body[at + 1..].iter().copied());
        }
    }
}

/// The value of a `Content-Length` header in `line`: `None` when the
/// line has none, `Some(None)` when its value is not a number. The header
/// is found anywhere in the line (the last one), after a body that lost
/// its own header and its line ending.
fn content_length(line: &[u8]) -> Option<Option<u64>> {
    let at = content_lengths(line).next_back()?;
    let value = std::str::from_utf8(&line[at + CONTENT_LENGTH.len()..]).ok();
    Some(value.and_then(|v| v.trim().parse::<u64>().ok()))
}

/// Where each `Content-Length:` in `bytes` starts, in any case.
fn content_lengths(bytes: &[u8]) -> impl DoubleEndedIterator<Item = usize> + '_ {
    bytes
        .windows(CONTENT_LENGTH.len())
        .enumerate()
        .filter(|(_, w)| w.eq_ignore_ascii_case(CONTENT_LENGTH))
        .map(|(at, _)| at)
}

/// The first [`QUOTED`] characters of a bad body, for the log.
fn quote(body: &[u8]) -> String {
    String::from_utf8_lossy(&body[..body.len().min(QUOTED)]).into_owned()
}

/// A reader that gives back bytes already read (`again`) before reading
/// on.
struct Rewound<R> {
    again: Vec<u8>,
    inner: R,
}

impl<R: BufRead> Read for Rewound<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(out.len());
        out[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Rewound<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.again.is_empty() {
            self.inner.fill_buf()
        } else {
            Ok(&self.again)
        }
    }

    fn consume(&mut self, n: usize) {
        if self.again.is_empty() {
            self.inner.consume(n);
        } else {
            self.again.drain(..n);
        }
    }
}

/// A JSON body as what the server gets: a message of the protocol, or a
/// refusal when it is not one but has an id to answer (a message without
/// an id is only logged; one whose id is not a number or a string is
/// answered with a null id).
pub(crate) fn classify(value: Value) -> Option<Incoming> {
    let raw_id = value.get("id").cloned();
    let id = (raw_id.clone()).and_then(|id| serde_json::from_value::<RequestId>(id).ok());
    let refuse = |why: String| {
        tracing::warn!(why, "skipped a message that is not a JSON-RPC 2.0 message");
        let Some(id) = id.clone() else {
            return raw_id.as_ref().map(|_| {
                Incoming::RefusedWithoutId(ResponseError {
                    code: ErrorCode::InvalidRequest as i32,
                    message: why,
                    data: None,
                })
            });
        };
        let response = Response::new_err(id, ErrorCode::InvalidRequest as i32, why);
        Some(Incoming::Refused(response))
    };
    if raw_id.is_some() && id.is_none() {
        return refuse("the request's `id` must be a number or a string".to_string());
    }
    if value.get("jsonrpc") != Some(&Value::from("2.0")) {
        return refuse("not a JSON-RPC 2.0 message: `jsonrpc` must be \"2.0\"".to_string());
    }
    let message = match (value.get("method"), value.get("id")) {
        (Some(_), Some(_)) => serde_json::from_value::<Request>(value).map(Message::Request),
        (Some(_), None) => serde_json::from_value::<Notification>(value).map(Message::Notification),
        (None, Some(_)) if value.get("result").is_some() || value.get("error").is_some() => {
            serde_json::from_value::<Response>(value).map(Message::Response)
        }
        _ => return refuse("neither a request, a notification nor a response".to_string()),
    };
    match message {
        Ok(message) => Some(Incoming::Message(message)),
        Err(error) => refuse(format!("not a message of the protocol: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(body: &str) -> String {
        format!("Content-Length: {}\r\n\r\n{body}", body.len())
    }

    fn bodies(input: &str) -> Vec<Value> {
        let mut framed = Framed::new(input.as_bytes());
        std::iter::from_fn(|| framed.next().expect("read")).collect()
    }

    #[test]
    fn huge_lengths_are_skipped_without_allocating_them() {
        for length in ["99999999999999", "18446744073709551615", "3000000000"] {
            let input = format!("Content-Length: {length}\r\n\r\n{{}}");
            assert_eq!(bodies(&input), Vec::<Value>::new());
        }
        let over = MAX_MESSAGE_BYTES as usize + 1;
        let input = format!(
            "Content-Length: {over}\r\n\r\n{}{}",
            " ".repeat(over),
            frame("1")
        );
        assert_eq!(bodies(&input), [Value::from(1)]);
        // An absurd length does not swallow the messages after it.
        let input = format!("Content-Length: 99999999999999\r\n\r\n{{}}{}", frame("2"));
        assert_eq!(bodies(&input), [Value::from(2)]);
        let input = format!(
            "Content-Length: 3000000000\r\n\r\n{{\n\"a\": 1\n}}\r\n{}",
            frame("3")
        );
        assert_eq!(bodies(&input), [Value::from(3)]);
    }

    #[test]
    fn bad_headers_and_wrong_lengths_lose_only_their_own_message() {
        let no_length = format!("Content-Type: x\r\n\r\n{{\"a\":1}}{}", frame("2"));
        assert_eq!(bodies(&no_length), [Value::from(2)]);
        let lf_only = "Content-Length: 1\n\n3".to_string() + &frame("4");
        assert_eq!(bodies(&lf_only), [Value::from(3), Value::from(4)]);
        let too_long = format!(
            "Content-Length: 30\r\n\r\n[5]{}{}",
            frame("[6]"),
            frame("7")
        );
        assert_eq!(bodies(&too_long), [serde_json::json!([6]), Value::from(7)]);
        let too_short = format!("Content-Length: 2\r\n\r\n[8,9]{}", frame("10"));
        assert_eq!(bodies(&too_short), [Value::from(10)]);
        let not_a_number = format!("Content-Length: abc\r\n\r\n{}", frame("11"));
        assert_eq!(bodies(&not_a_number), [Value::from(11)]);
    }

    #[test]
    fn only_json_rpc_2_messages_are_taken_and_bad_requests_refused() {
        let refused = |text: &str| match classify(serde_json::from_str(text).unwrap()) {
            Some(Incoming::Refused(response)) => {
                (serde_json::to_value(response).unwrap()["error"]["code"].as_i64())
                    .map(|code| (code, true))
            }
            Some(Incoming::RefusedWithoutId(error)) => Some((i64::from(error.code), false)),
            Some(Incoming::Message(message)) => panic!("taken: {message:?}"),
            None => None,
        };
        // The error code, and whether it answers the request's own id.
        let invalid = Some((ErrorCode::InvalidRequest as i64, true));
        assert_eq!(refused(r#"{"jsonrpc":"1.0","id":7,"method":"x"}"#), invalid);
        assert_eq!(refused(r#"{"jsonrpc":"2.0","id":7,"method":5}"#), invalid);
        assert_eq!(refused(r#"{"jsonrpc":"2.0","id":7}"#), invalid);
        // An id that is not a number or a string is answered with a null
        // id.
        let without_id = Some((ErrorCode::InvalidRequest as i64, false));
        assert_eq!(
            refused(r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#),
            without_id
        );
        assert_eq!(
            refused(r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#),
            without_id
        );
        assert_eq!(
            refused(r#"{"jsonrpc":"1.0","id":[1],"method":"x"}"#),
            without_id
        );
        assert_eq!(refused(r#"{"jsonrpc":"1.0","method":"x"}"#), None);
        let taken = classify(serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "x"}));
        assert!(matches!(
            taken,
            Some(Incoming::Message(Message::Request(_)))
        ));
    }

    #[test]
    fn an_error_for_an_unreadable_id_is_written_with_a_null_id() {
        let error = ResponseError {
            code: ErrorCode::InvalidRequest as i32,
            message: "bad id".to_string(),
            data: None,
        };
        let mut out = Vec::new();
        Outgoing::NullIdError(error).write(&mut out).expect("write");
        let written = bodies(std::str::from_utf8(&out).expect("utf-8"));
        assert_eq!(written.len(), 1, "{written:?}");
        assert_eq!(written[0]["id"], Value::Null);
        assert_eq!(written[0]["jsonrpc"], "2.0");
        assert_eq!(
            written[0]["error"]["code"],
            ErrorCode::InvalidRequest as i32
        );
    }
}
