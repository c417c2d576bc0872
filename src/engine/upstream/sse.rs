//! An SSE decoder that follows the WHATWG parsing rules, apart from HTTP.
//!
//! We keep our own decoder (about what TensorZero wrote) rather than
//! `eventsource-stream` because the gateway needs three things that one lacks: a cap
//! on line length (an endless line must fail the attempt, not eat memory), events
//! that hand back the `data` bytes without copying in the common one-line case (the
//! OpenAI relay forwards them untouched), and no notion of reconnecting at all.
//!
//! Bytes go in as they arrive, split anywhere, even inside a UTF-8 character: lines
//! end only at ASCII `\r` or `\n`, so a character is never cut. The decoder does no
//! I/O and reads no clock. Comments (`: keep-alive`) produce no event, which is how
//! they avoid resetting the idle timeout.

use bytes::{Buf, Bytes, BytesMut};

/// One dispatched SSE event; only `data` matters to an OpenAI stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The event's data, its lines joined by `\n`.
    pub data: Bytes,
}

/// The upstream sent more than the decoder holds: one line, or one event's joined
/// `data` (many `data:` lines with no blank line between them), over the cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TooLong {
    /// One line over the cap.
    #[error("upstream sent an SSE line longer than {0} bytes")]
    Line(usize),
    /// One event's data over the cap.
    #[error("upstream sent an SSE event with more than {0} bytes of data")]
    Event(usize),
}

/// Incremental SSE decoder.
#[derive(Debug)]
pub struct SseDecoder {
    buf: BytesMut,
    /// Bytes of `buf` already searched for a line end.
    scanned: usize,
    /// A `\r` ended the last line, so a leading `\n` belongs to it.
    after_cr: bool,
    /// The start of the stream may carry a byte-order mark.
    at_start: bool,
    data: Option<DataBuf>,
    /// Cap on one line and on one event's joined data.
    max: usize,
}

/// The data buffer: one line is kept as received, more lines are joined.
#[derive(Debug)]
enum DataBuf {
    One(Bytes),
    Joined(BytesMut),
}

impl SseDecoder {
    /// A decoder that rejects a line, or an event's data, longer than `max` bytes.
    pub fn new(max: usize) -> Self {
        SseDecoder {
            buf: BytesMut::new(),
            scanned: 0,
            after_cr: false,
            at_start: true,
            data: None,
            max,
        }
    }

    /// Adds bytes as they arrived.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete event, if the bytes so far hold one.
    pub fn next_event(&mut self) -> Result<Option<SseEvent>, TooLong> {
        if let Some(data) = self.whole_one_line_event() {
            return Ok(Some(SseEvent { data }));
        }
        while let Some(line) = self.next_line()? {
            if line.is_empty() {
                if let Some(data) = self.data.take() {
                    return Ok(Some(SseEvent {
                        data: data.finish(),
                    }));
                }
            } else {
                self.field(line)?;
            }
        }
        Ok(None)
    }

    /// The common event, `data: X\n\n` whole at the front of the buffer, taken in
    /// one cut; exactly what the line-by-line rules below make of it.
    fn whole_one_line_event(&mut self) -> Option<Bytes> {
        if self.data.is_some() || self.after_cr || self.at_start || self.scanned != 0 {
            return None;
        }
        let value = match self.buf.get(..6)? {
            b"data: " => 6,
            [b'd', b'a', b't', b'a', b':', _] => 5,
            _ => return None,
        };
        let end = memchr::memchr2(b'\n', b'\r', &self.buf)?;
        if self.buf[end] != b'\n' || self.buf.get(end + 1) != Some(&b'\n') {
            return None;
        }
        let mut event = self.buf.split_to(end + 2);
        event.truncate(end);
        event.advance(value);
        Some(event.freeze())
    }

    fn next_line(&mut self) -> Result<Option<Bytes>, TooLong> {
        if self.after_cr && !self.buf.is_empty() {
            if self.buf[0] == b'\n' {
                self.buf.advance(1);
            }
            self.after_cr = false;
        }
        if self.at_start && self.buf.len() >= 3 {
            if self.buf.starts_with("\u{feff}".as_bytes()) {
                self.buf.advance(3);
                self.scanned = 0;
            }
            self.at_start = false;
        }
        let Some(offset) = memchr::memchr2(b'\n', b'\r', &self.buf[self.scanned..]) else {
            self.scanned = self.buf.len();
            if self.buf.len() > self.max {
                return Err(TooLong::Line(self.max));
            }
            return Ok(None);
        };
        let end = self.scanned + offset;
        self.after_cr = self.buf[end] == b'\r';
        let line = self.buf.split_to(end).freeze();
        self.buf.advance(1);
        self.scanned = 0;
        self.at_start = false;
        Ok(Some(line))
    }

    fn field(&mut self, line: Bytes) -> Result<(), TooLong> {
        if line[0] == b':' {
            return Ok(());
        }
        let (name, value) = match memchr::memchr(b':', &line) {
            Some(colon) => {
                let skip = usize::from(line.get(colon + 1) == Some(&b' '));
                (line.slice(..colon), line.slice(colon + 1 + skip..))
            }
            None => (line.clone(), Bytes::new()),
        };
        if &name[..] == b"data" {
            self.data = Some(match self.data.take() {
                None => DataBuf::One(value),
                Some(previous) if previous.len() + 1 + value.len() > self.max => {
                    return Err(TooLong::Event(self.max));
                }
                Some(previous) => previous.join(&value),
            });
        }
        Ok(())
    }
}

impl DataBuf {
    fn len(&self) -> usize {
        match self {
            DataBuf::One(bytes) => bytes.len(),
            DataBuf::Joined(buf) => buf.len(),
        }
    }

    fn join(self, next: &[u8]) -> DataBuf {
        let mut joined = match self {
            DataBuf::One(first) => BytesMut::from(&first[..]),
            DataBuf::Joined(buf) => buf,
        };
        joined.extend_from_slice(b"\n");
        joined.extend_from_slice(next);
        DataBuf::Joined(joined)
    }

    fn finish(self) -> Bytes {
        match self {
            DataBuf::One(bytes) => bytes,
            DataBuf::Joined(buf) => buf.freeze(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode_in_pieces(input: &[u8], cuts: &[usize]) -> Vec<String> {
        let mut decoder = SseDecoder::new(1 << 20);
        let mut events = Vec::new();
        let mut start = 0;
        let mut ends: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
        ends.sort_unstable();
        ends.push(input.len());
        for end in ends {
            decoder.push(&input[start..end.max(start)]);
            start = end.max(start);
            while let Some(event) = decoder.next_event().expect("lines are short") {
                events.push(String::from_utf8(event.data.to_vec()).expect("utf-8 survives"));
            }
        }
        events
    }

    fn decode(input: &str) -> Vec<String> {
        decode_in_pieces(input.as_bytes(), &[])
    }

    #[test]
    fn all_three_line_endings_end_lines() {
        assert_eq!(
            decode("data: a\n\ndata: b\r\n\r\ndata: c\r\rdata: d\n\n"),
            ["a", "b", "c", "d"]
        );
    }

    #[test]
    fn multi_line_data_is_joined_with_newlines() {
        assert_eq!(decode("data: one\ndata:two\ndata\n\n"), ["one\ntwo\n"]);
    }

    #[test]
    fn comments_other_fields_and_empty_events_produce_nothing() {
        assert_eq!(
            decode(": keep-alive\n\nevent: x\nid: 3\nretry: 10\n\n\n\ndata: y\n\n"),
            ["y"]
        );
    }

    #[test]
    fn an_unterminated_event_at_the_end_is_not_dispatched() {
        assert!(decode("data: half").is_empty());
        assert!(decode("data: half\n").is_empty());
    }

    #[test]
    fn a_byte_order_mark_at_the_start_is_ignored() {
        assert_eq!(decode("\u{feff}data: x\n\n"), ["x"]);
    }

    #[test]
    fn a_cr_lf_split_across_reads_is_one_line_end() {
        assert_eq!(
            decode_in_pieces(b"data: a\r\n\r\ndata: b\r\n\r\n", &[8, 9, 10]),
            ["a", "b"]
        );
    }

    #[test]
    fn a_utf8_character_split_across_reads_survives() {
        let input = "data: 香酥鸭\n\n".as_bytes();
        for cut in 0..input.len() {
            assert_eq!(decode_in_pieces(input, &[cut]), ["香酥鸭"], "cut at {cut}");
        }
    }

    #[test]
    fn an_endless_line_fails_instead_of_growing() {
        let mut decoder = SseDecoder::new(16);
        decoder.push(b"data: 0123456789abcdef");
        assert_eq!(decoder.next_event(), Err(TooLong::Line(16)));
    }

    #[test]
    fn endless_data_lines_of_one_event_fail_instead_of_growing() {
        let mut decoder = SseDecoder::new(16);
        decoder.push(b"data: 0123456789\ndata: abcd\n");
        assert_eq!(decoder.next_event(), Ok(None), "15 bytes joined fit");
        decoder.push(b"data: ef\n");
        assert_eq!(decoder.next_event(), Err(TooLong::Event(16)));
    }

    #[test]
    fn whole_one_line_events_keep_their_exact_data() {
        assert_eq!(
            decode(": hi\n\ndata: a\n\ndata:b\n\ndata:\n\ndata:  c\n\ndata: d\r\n\r\n"),
            ["a", "b", "", " c", "d"]
        );
    }

    proptest! {
        #![proptest_config(crate::test_support::proptest_config(2000))]

        #[test]
        fn any_chunking_yields_the_same_events(
            cuts in proptest::collection::vec(0usize..400, 0..12),
            crlf in any::<bool>(),
        ) {
            let newline = if crlf { "\r\n" } else { "\n" };
            let text = [": ping", "data: {\"a\":\"香\"}", "", "data: x", "data: y", "", "event: e", "data: 鸭子", ""]
                .join(newline) + newline;
            let whole = decode(&text);
            prop_assert_eq!(decode_in_pieces(text.as_bytes(), &cuts), whole);
        }

        /// Fed a byte at a time, no event is ever whole in the buffer, so the
        /// one-cut path for `data: X\n\n` never runs: whatever the text, both ways
        /// must give the same events.
        #[test]
        fn the_one_cut_path_reads_as_the_line_rules_do(
            tokens in proptest::collection::vec(prop::sample::select(vec![
                "data: ", "data:", "data", "dat", ": c", "event: e", "x", "香", " ", ":",
                "\n", "\n", "\n\n", "\r", "\r\n", "\u{feff}",
            ]), 0..30),
        ) {
            let text = tokens.concat();
            let bytes = text.as_bytes();
            let one_by_one: Vec<usize> = (1..bytes.len()).collect();
            prop_assert_eq!(decode(&text), decode_in_pieces(bytes, &one_by_one));
        }
    }
}
