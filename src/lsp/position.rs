//! Byte offsets to editor positions and back.
//!
//! Diagnostics and the project index speak in byte offsets; the language
//! server protocol speaks in lines and UTF-16 code units (the default
//! position encoding, which every client supports). [`LineIndex`] converts
//! between the two for one text, and never panics on an offset or a
//! position past the end: both clamp to the text.

use lsp_types::{Position, Range};

/// Line starts of one text, for conversions.
#[derive(Clone, Debug)]
pub(super) struct LineIndex<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    pub(super) fn new(text: &'a str) -> LineIndex<'a> {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        LineIndex { text, starts }
    }

    /// The position of byte `offset` (clamped, and moved back to a
    /// character boundary).
    pub(super) fn position(&self, offset: usize) -> Position {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.starts.partition_point(|&s| s <= offset) - 1;
        let start = self.starts[line];
        let character: usize = self.text[start..offset].chars().map(char::len_utf16).sum();
        Position::new(line as u32, character as u32)
    }

    pub(super) fn range(&self, span: std::ops::Range<usize>) -> Range {
        Range::new(self.position(span.start), self.position(span.end))
    }

    /// The byte offset of `position` (a column past the end of its line is
    /// the line's end; a line past the end is the text's end).
    pub(super) fn offset(&self, position: Position) -> usize {
        let Some(&start) = self.starts.get(position.line as usize) else {
            return self.text.len();
        };
        let end = self
            .starts
            .get(position.line as usize + 1)
            .map_or(self.text.len(), |&next| next - 1);
        let mut units = 0u32;
        for (i, c) in self.text[start..end].char_indices() {
            if units >= position.character {
                return start + i;
            }
            units += c.len_utf16() as u32;
        }
        end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_count_utf16_units_and_round_trip() {
        // `é` is one UTF-16 unit (two bytes); `𝑥` is two units (four bytes).
        let text = "a = \"é𝑥\"\nname = \"y\"\n";
        let index = LineIndex::new(text);
        let y = text.find('y').unwrap();
        assert_eq!(index.position(y), Position::new(1, 8));
        let quote = text.find("\"\n").unwrap();
        assert_eq!(index.position(quote), Position::new(0, 8));
        for offset in [0, 5, quote, y, text.len()] {
            assert_eq!(index.offset(index.position(offset)), offset, "{offset}");
        }
        // Inside a character, past a line's end, past the text's end.
        assert_eq!(index.position(6), Position::new(0, 5));
        assert_eq!(index.offset(Position::new(0, 99)), quote + 1);
        assert_eq!(index.offset(Position::new(9, 0)), text.len());
        assert_eq!(index.position(999), Position::new(2, 0));
    }
}
