//! `file:` URIs to paths and back.
//!
//! Paths are absolute and UTF-8 (the database's `Utf8PathBuf`); a URI of
//! another scheme, or one that does not decode to such a path, is not a
//! file the server knows.

use camino::{Utf8Path, Utf8PathBuf};
use lsp_types::Uri;
use std::str::FromStr as _;

/// The path of a `file:` URI.
pub(super) fn path_of(uri: &Uri) -> Option<Utf8PathBuf> {
    let text = uri.as_str();
    let rest = text.strip_prefix("file://")?;
    // `file:///x` has an empty authority; `file://localhost/x` names this
    // machine.
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    let decoded = percent_decode(rest)?;
    let path = Utf8PathBuf::from(decoded);
    path.is_absolute().then_some(path)
}

/// The `file:` URI of an absolute path.
pub(super) fn uri_of(path: &Utf8Path) -> Uri {
    let mut text = String::from("file://");
    for byte in path.as_str().bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'/' | b'-' | b'_' | b'.' | b'~' => {
                text.push(byte as char)
            }
            other => text.push_str(&format!("%{other:02X}")),
        }
    }
    // Every character outside the unreserved set is escaped, so the text
    // always parses; the fallback keeps the function total regardless.
    Uri::from_str(&text).unwrap_or_else(|_| Uri::from_str("file:///").expect("a valid URI"))
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_round_trip_through_uris() {
        for path in ["/work/p/vit-fp8.toml", "/tmp/a b/é#1.toml", "/x%y"] {
            let uri = uri_of(Utf8Path::new(path));
            assert_eq!(
                path_of(&uri).as_deref(),
                Some(Utf8Path::new(path)),
                "{uri:?}"
            );
        }
        assert_eq!(uri_of(Utf8Path::new("/a b")).as_str(), "file:///a%20b");
        let other = Uri::from_str("untitled:Untitled-1").expect("uri");
        assert_eq!(path_of(&other), None);
        let host = Uri::from_str("file://localhost/etc/x").expect("uri");
        assert_eq!(path_of(&host).as_deref(), Some(Utf8Path::new("/etc/x")));
    }
}
