//! A fast path for the chunks upstreams send all the time.
//!
//! serde_json spends about 4,400 instructions on a 170-byte content chunk, a third
//! of ladle's own work on a streamed answer. This scanner reads the few fields the
//! gateway needs in one pass and skips the rest, validating as it goes. It only
//! answers when it is sure: anything unusual (an `error` or `usage` value, an escape
//! inside a key, a duplicate field, a wrong type, deep nesting, a lone surrogate)
//! makes it step aside, and `chunk::parse` asks serde_json, whose answer is the
//! definition. A property test holds the two to the same result.

use super::chunk::{Chunk, Meta};

/// The chunk, when the payload is a well-formed chunk of a common shape; `None`
/// means "ask serde_json", never "malformed". Takes bytes: only strings may hold
/// non-ASCII, so checking UTF-8 string by string (and only where a high bit was
/// seen) covers the whole payload.
pub fn scan(bytes: &[u8], want_meta: bool) -> Option<Chunk> {
    scan_recording(bytes, want_meta).map(|(chunk, _)| chunk)
}

/// `scan`, first trying `shape`, the previous chunk's, and leaving this chunk's
/// shape there for the next one.
pub fn scan_like(bytes: &[u8], want_meta: bool, shape: &mut Option<Shape>) -> Option<Chunk> {
    if let Some(known) = shape.as_ref().filter(|s| s.want_meta == want_meta)
        && let Some(chunk) = known.read(bytes)
    {
        return Some(chunk);
    }
    let (chunk, text) = scan_recording(bytes, want_meta)?;
    *shape = text.map(|text| Shape::new(bytes, text, &chunk, want_meta));
    Some(chunk)
}

fn scan_recording(bytes: &[u8], want_meta: bool) -> Option<(Chunk, Option<Text>)> {
    let mut cursor = Cursor {
        bytes,
        at: 0,
        text: None,
        texts: 0,
    };
    let chunk = cursor.top(want_meta)?;
    cursor.space();
    let text = cursor.text.filter(|_| cursor.texts == 1);
    (cursor.at == cursor.bytes.len()).then_some((chunk, text))
}

/// A chunk seen around its one text value. The chunks of a stream are usually
/// byte for byte the same but for that text: the same id, model, index and
/// field order. A chunk that starts with this prefix and ends with this suffix,
/// with one well-formed string between, says what the seen chunk said but that
/// string; a left-to-right parser reaches the string in the same state and leaves
/// it in the same state, so only the string needs reading. About a tenth of the
/// work of a whole scan.
pub struct Shape {
    /// Up to and including the text's opening quote.
    prefix: Box<[u8]>,
    /// From the text's closing quote to the end.
    suffix: Box<[u8]>,
    field: TextField,
    /// What the seen chunk said, without the text.
    rest: Chunk,
    want_meta: bool,
}

/// Which field the text was.
#[derive(Clone, Copy)]
enum TextField {
    Content,
    Reasoning,
}

/// Where the one text string of the first choice's delta lies.
#[derive(Clone, Copy)]
struct Text {
    open: usize,
    close: usize,
    field: TextField,
}

impl Shape {
    fn new(bytes: &[u8], text: Text, chunk: &Chunk, want_meta: bool) -> Shape {
        let mut rest = chunk.clone();
        match text.field {
            TextField::Content => rest.content = None,
            TextField::Reasoning => rest.reasoning = None,
        }
        Shape {
            prefix: bytes[..=text.open].into(),
            suffix: bytes[text.close..].into(),
            field: text.field,
            rest,
            want_meta,
        }
    }

    fn read(&self, bytes: &[u8]) -> Option<Chunk> {
        let close = bytes.len().checked_sub(self.suffix.len())?;
        if close < self.prefix.len()
            || !bytes.starts_with(&self.prefix)
            || !bytes.ends_with(&self.suffix)
        {
            return None;
        }
        let mut cursor = Cursor {
            bytes,
            at: self.prefix.len() - 1,
            text: None,
            texts: 0,
        };
        let span = cursor.string()?;
        if span.end != close {
            return None;
        }
        let text = Some(cursor.text_of(&span)?).filter(|t| !t.is_empty());
        let mut chunk = self.rest.clone();
        match self.field {
            TextField::Content => chunk.content = text,
            TextField::Reasoning => chunk.reasoning = text,
        }
        Some(chunk)
    }
}

/// Where the plain run of a string starting at `at` stops: the index of its quote,
/// a backslash or a control character (which JSON forbids inside strings), or the
/// end of `bytes`. Eight bytes at a time; `high` collects the high bits of the run,
/// so non-ASCII text is noticed.
fn plain_run(bytes: &[u8], mut at: usize, high: &mut u8) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    // The high bit of every byte of `x` that is zero; exact for the lowest one.
    let zeros = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
    while let Some(eight) = bytes.get(at..at + 8) {
        let mut word = [0; 8];
        word.copy_from_slice(eight);
        let word = u64::from_le_bytes(word);
        let controls = word.wrapping_sub(ONES * 0x20) & !word & HIGHS;
        let stops = zeros(word ^ (ONES * u64::from(b'"')))
            | zeros(word ^ (ONES * u64::from(b'\\')))
            | controls;
        if stops != 0 {
            let lowest = stops & stops.wrapping_neg();
            *high |= u8::from(word & HIGHS & lowest.wrapping_sub(1) != 0);
            return at + (stops.trailing_zeros() / 8) as usize;
        }
        *high |= u8::from(word & HIGHS != 0);
        at += 8;
    }
    while let Some(&byte) = bytes.get(at) {
        if byte == b'"' || byte == b'\\' || byte < 0x20 {
            break;
        }
        *high |= byte & 0x80;
        at += 1;
    }
    at
}

/// Deepest nesting skipped before stepping aside (serde_json allows 128).
const MAX_DEPTH: usize = 32;

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
    /// The last text string read in the first choice's delta.
    text: Option<Text>,
    /// How many text strings the delta held.
    texts: u8,
}

/// A string's place in the input, between its quotes.
struct Span {
    start: usize,
    end: usize,
    escaped: bool,
}

impl Cursor<'_> {
    fn top(&mut self, want_meta: bool) -> Option<Chunk> {
        let mut chunk = Chunk::default();
        let mut meta = Meta::default();
        let mut seen = Seen::default();
        self.object(|this, key| {
            match key {
                b"choices" => {
                    seen.first(0)?;
                    this.choices(&mut chunk)?;
                }
                // Rare, and their values are kept whole: serde_json's job.
                b"usage" => {
                    seen.first(3)?;
                    this.literal(b"null")?;
                }
                b"error" => {
                    seen.first(4)?;
                    this.literal(b"null")?;
                }
                b"id" => {
                    seen.first(1)?;
                    meta.id = this.nullable_string(want_meta)?;
                }
                b"model" => {
                    seen.first(2)?;
                    meta.model = this.nullable_string(want_meta)?;
                }
                _ => this.skip(0)?,
            }
            Some(())
        })?;
        chunk.meta = want_meta.then(|| Box::new(meta));
        Some(chunk)
    }

    /// `choices`: `null`, or an array whose first element is a choice object.
    fn choices(&mut self, chunk: &mut Chunk) -> Option<()> {
        if self.peek()? == b'n' {
            return self.literal(b"null");
        }
        self.expect(b'[')?;
        self.space();
        if self.peek()? == b']' {
            self.at += 1;
            return Some(());
        }
        self.choice(chunk)?;
        loop {
            self.space();
            match self.next()? {
                b']' => return Some(()),
                b',' => {
                    self.space();
                    self.skip(1)?;
                }
                _ => return None,
            }
        }
    }

    fn choice(&mut self, chunk: &mut Chunk) -> Option<()> {
        let mut seen = Seen::default();
        self.object(|this, key| {
            match key {
                b"delta" | b"message" => {
                    seen.first(0)?;
                    if this.peek()? == b'n' {
                        this.literal(b"null")?;
                    } else {
                        this.delta(chunk)?;
                    }
                }
                b"finish_reason" => {
                    seen.first(1)?;
                    chunk.finish_reason = this.nullable_string(true)?;
                }
                _ => this.skip(1)?,
            }
            Some(())
        })
    }

    fn delta(&mut self, chunk: &mut Chunk) -> Option<()> {
        let mut seen = Seen::default();
        let (mut content, mut reasoning_content, mut reasoning) = (None, None, None);
        self.object(|this, key| {
            match key {
                b"content" => {
                    seen.first(0)?;
                    content = this.text_field(TextField::Content)?;
                }
                b"reasoning_content" => {
                    seen.first(1)?;
                    reasoning_content = this.text_field(TextField::Reasoning)?;
                }
                b"reasoning" => {
                    seen.first(2)?;
                    reasoning = this.text_field(TextField::Reasoning)?;
                }
                _ => this.skip(2)?,
            }
            Some(())
        })?;
        chunk.content = content.filter(|s: &String| !s.is_empty());
        chunk.reasoning = reasoning_content
            .filter(|s: &String| !s.is_empty())
            .or(reasoning.filter(|s| !s.is_empty()));
        Some(())
    }

    /// `null` or a text string, noting where a string lies.
    fn text_field(&mut self, field: TextField) -> Option<Option<String>> {
        if self.peek()? == b'n' {
            self.literal(b"null")?;
            return Some(None);
        }
        let open = self.at;
        let span = self.string()?;
        self.texts += 1;
        self.text = Some(Text {
            open,
            close: span.end,
            field,
        });
        self.text_of(&span).map(Some)
    }

    /// An object, calling `field` with each key (escape-free) once the cursor is
    /// on its value.
    fn object(&mut self, mut field: impl FnMut(&mut Self, &[u8]) -> Option<()>) -> Option<()> {
        self.space();
        self.expect(b'{')?;
        self.space();
        if self.peek()? == b'}' {
            self.at += 1;
            return Some(());
        }
        loop {
            self.space();
            let key = self.string()?;
            if key.escaped {
                return None;
            }
            self.space();
            self.expect(b':')?;
            self.space();
            let bytes = self.bytes;
            field(self, &bytes[key.start..key.end])?;
            self.space();
            match self.next()? {
                b',' => {}
                b'}' => return Some(()),
                _ => return None,
            }
        }
    }

    /// `null` or a string, unescaped; checked but not kept unless `keep`.
    fn nullable_string(&mut self, keep: bool) -> Option<Option<String>> {
        if self.peek()? == b'n' {
            self.literal(b"null")?;
            return Some(None);
        }
        let span = self.string()?;
        if !keep {
            return Some(None);
        }
        self.text_of(&span).map(Some)
    }

    /// A string's value, unescaped.
    fn text_of(&self, span: &Span) -> Option<String> {
        let raw = std::str::from_utf8(&self.bytes[span.start..span.end]).ok()?;
        if span.escaped {
            unescape(raw)
        } else {
            Some(raw.to_owned())
        }
    }

    /// A string starting at the cursor; checks its escapes and that it holds no
    /// control characters, as JSON requires.
    fn string(&mut self) -> Option<Span> {
        self.expect(b'"')?;
        let start = self.at;
        let mut escaped = false;
        let mut high = 0;
        loop {
            self.at = plain_run(self.bytes, self.at, &mut high);
            match self.next()? {
                b'"' => {
                    if high != 0 {
                        std::str::from_utf8(&self.bytes[start..self.at - 1]).ok()?;
                    }
                    return Some(Span {
                        start,
                        end: self.at - 1,
                        escaped,
                    });
                }
                b'\\' => {
                    escaped = true;
                    match self.next()? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                        b'u' => {
                            let unit = self.hex4()?;
                            // Surrogates are checked in pairs by serde_json; leave
                            // them to it.
                            if (0xD800..0xE000).contains(&unit) {
                                return None;
                            }
                        }
                        _ => return None,
                    }
                }
                _ => return None,
            }
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.bytes.get(self.at..self.at + 4)?;
        self.at += 4;
        let text = std::str::from_utf8(digits).ok()?;
        if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u32::from_str_radix(text, 16).ok()
    }

    /// Skips any value, checking it.
    fn skip(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'{' => self.object(|this, _| this.skip(depth + 1)),
            b'[' => {
                self.at += 1;
                self.space();
                if self.peek()? == b']' {
                    self.at += 1;
                    return Some(());
                }
                loop {
                    self.space();
                    self.skip(depth + 1)?;
                    self.space();
                    match self.next()? {
                        b',' => {}
                        b']' => return Some(()),
                        _ => return None,
                    }
                }
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    fn number(&mut self) -> Option<()> {
        if self.peek()? == b'-' {
            self.at += 1;
        }
        match self.next()? {
            b'0' => {}
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            self.digit()?;
            self.digits();
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            self.digit()?;
            self.digits();
        }
        Some(())
    }

    fn digit(&mut self) -> Option<()> {
        self.next().filter(u8::is_ascii_digit).map(drop)
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.at += 1;
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let found = self.bytes.get(self.at..self.at + word.len())?;
        self.at += word.len();
        (found == word).then_some(())
    }

    fn space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\n' | b'\r' | b'\t')) {
            self.at += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        (self.next()? == byte).then_some(())
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let byte = self.peek()?;
        self.at += 1;
        Some(byte)
    }
}

/// Which known fields of one object have been seen; a second one steps aside, as
/// serde_json calls a duplicate field an error.
#[derive(Default)]
struct Seen(u8);

impl Seen {
    fn first(&mut self, field: u8) -> Option<()> {
        let bit = 1 << field;
        if self.0 & bit != 0 {
            return None;
        }
        self.0 |= bit;
        Some(())
    }
}

/// Decodes a string's escapes (already checked, surrogates excluded).
fn unescape(raw: &str) -> Option<String> {
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let (decoded, length) = match *rest.as_bytes().get(at + 1)? {
            b'u' => {
                let unit = u32::from_str_radix(rest.get(at + 2..at + 6)?, 16).ok()?;
                (char::from_u32(unit)?, 6)
            }
            b'b' => ('\u{8}', 2),
            b'f' => ('\u{c}', 2),
            b'n' => ('\n', 2),
            b'r' => ('\r', 2),
            b't' => ('\t', 2),
            quote_slash_or_backslash => (char::from(quote_slash_or_backslash), 2),
        };
        out.push(decoded);
        rest = &rest[at + length..];
    }
    out.push_str(rest);
    Some(out)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{Shape, scan, scan_like};
    use crate::upstream::chunk::{Parsed, Reader, parse, parse_with_serde};

    /// Whenever the scanner answers, serde_json gives the same chunk.
    fn agrees(text: &str, want_meta: bool) -> Option<()> {
        let chunk = scan(text.as_bytes(), want_meta)?;
        assert_eq!(
            parse_with_serde(text, want_meta),
            Ok(Parsed::Chunk(chunk)),
            "{text}"
        );
        Some(())
    }

    #[test]
    fn the_common_shapes_take_the_fast_path_and_agree() {
        let chunks = [
            r#"{"id":"c1","object":"chat.completion.chunk","created":1764480000,"model":"m","choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"choices":[{"delta":{"reasoning_content":"想一想"},"finish_reason":null}],"usage":null}"#,
            r#"{"choices":[{"delta":{"reasoning":"r"}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
            r#" { "choices" : [ { "delta" : { "content" : "{\"a\": \"b\\n\"}\n\t\u4e2d" } } , {"x":[1,-2.5e3,true,null]} ] } "#,
            r#"{"choices":[],"model":null}"#,
            r#"{"choices":null}"#,
            r#"{"choices":[{"message":{"content":"whole"},"finish_reason":"stop"}]}"#,
            "{}",
        ];
        for text in chunks {
            for want_meta in [true, false] {
                assert!(agrees(text, want_meta).is_some(), "slow path for {text}");
            }
        }
    }

    #[test]
    fn the_fixture_streams_take_the_fast_path_except_usage_and_errors() {
        let streams = [
            include_str!("../../tests/fixtures/stream-reasoning-then-content.sse"),
            include_str!("../../tests/fixtures/stream-busy-error.sse"),
        ];
        for line in streams.iter().flat_map(|s| s.lines()) {
            let Some(data) = line.strip_prefix("data:").map(str::trim) else {
                continue;
            };
            if data == "[DONE]" {
                continue;
            }
            let value: serde_json::Value = serde_json::from_str(data).expect("fixture is JSON");
            let rare = !value["usage"].is_null() || !value["error"].is_null();
            assert_eq!(agrees(data, true).is_some(), !rare, "{data}");
        }
    }

    #[test]
    fn unusual_payloads_are_left_to_serde() {
        for text in [
            r#"{"choices":[{"delta":{"content":"a"}}],"choices":null}"#,
            r#"{"usage":null,"usage":null}"#,
            r#"{"choices":[{"delta":{"content":"\ud83d\ude00"}}]}"#,
            r#"{"ch\u006fices":[]}"#,
            r#"{"choices":[{"delta":{"content":5}}]}"#,
            r#"{"error":{"message":"busy"}}"#,
            r#"{"choices":[],}"#,
            r#"{"choices":[]} x"#,
            "{\"id\":\"a\u{1}\"}",
        ] {
            assert_eq!(scan(text.as_bytes(), true), None, "{text}");
        }
    }

    #[test]
    fn invalid_utf8_in_any_string_is_left_to_serde() {
        for bytes in [
            &b"{\"choices\":[{\"delta\":{\"content\":\"ab\xff\"}}]}"[..],
            b"{\"object\":\"chat.completion.chunk\xe4\xb8\"}",
            b"{\"obj\xc3\x28ect\":1}",
            b"{\"id\":\"twelve bytes \xed\xa0\x80 long\"}",
        ] {
            assert_eq!(scan(bytes, true), None, "{bytes:?}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Any bytes inside a string: the scanner answers only for valid UTF-8
        /// without control characters, and then reads the string back whole.
        #[test]
        fn string_contents_are_checked_byte_for_byte(
            inside in prop::collection::vec(any::<u8>(), 0..40),
            kept in any::<bool>(),
        ) {
            let key: &[u8] = if kept { b"content" } else { b"role" };
            let mut bytes = b"{\"choices\":[{\"delta\":{\"".to_vec();
            bytes.extend_from_slice(key);
            bytes.extend_from_slice(b"\":\"");
            bytes.extend_from_slice(&inside);
            bytes.extend_from_slice(b"\"}}]}");
            let plain = std::str::from_utf8(&inside)
                .ok()
                .filter(|t| !t.contains(['"', '\\']) && !t.chars().any(|c| c < ' '));
            match (scan(&bytes, false), plain) {
                (Some(chunk), plain) => {
                    let text = std::str::from_utf8(&bytes);
                    prop_assert!(text.is_ok(), "accepted invalid UTF-8: {:?}", inside);
                    let text = text.unwrap_or_default();
                    prop_assert_eq!(parse_with_serde(text, false), Ok(Parsed::Chunk(chunk.clone())));
                    if let Some(text) = plain {
                        let expected = (kept && !text.is_empty()).then(|| text.to_owned());
                        prop_assert_eq!(chunk.content, expected);
                    }
                }
                (None, None) => {}
                (None, Some(text)) => prop_assert!(false, "refused plain text {:?}", text),
            }
        }
    }

    const PREFIX: &str = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":""#;
    const SUFFIX: &str = r#""},"finish_reason":null}]}"#;

    fn shaped(middle: &[u8]) -> Vec<u8> {
        [PREFIX.as_bytes(), middle, SUFFIX.as_bytes()].concat()
    }

    /// The shape the scanner keeps after `first`.
    fn shape_after(first: &[u8], want_meta: bool) -> Shape {
        let mut shape = None;
        scan_like(first, want_meta, &mut shape).expect("a common chunk");
        shape.expect("one text value, so a shape")
    }

    #[test]
    fn a_chunk_shaped_like_the_last_is_read_by_its_text_alone() {
        let shape = shape_after(&shaped(b"tok "), true);
        for middle in [
            "番茄",
            "",
            "a\\\"b\\n\\u4e2d",
            "x y z, and more than eight bytes",
        ] {
            let bytes = shaped(middle.as_bytes());
            let read = shape.read(&bytes).expect("read by shape");
            assert_eq!(Some(read), scan(&bytes, true), "{middle}");
        }
        let reasoning = shape_after(
            br#"{"choices":[{"delta":{"reasoning_content":"r"}}]}"#,
            false,
        );
        let read = reasoning
            .read(br#"{"choices":[{"delta":{"reasoning_content":"think"}}]}"#)
            .expect("read by shape");
        assert_eq!(read.reasoning.as_deref(), Some("think"));
    }

    #[test]
    fn a_text_that_changes_the_structure_is_not_read_by_shape() {
        let shape = shape_after(&shaped(b"tok "), false);
        for middle in [
            &br#"x","content":"y"#[..],
            br#"a\"#,
            br#"x"},"finish_reason":"stop"}],"z":{"a":""#,
            b"\x01",
            b"\xff",
            br#"\ud83d\ude00"#,
            br#"\q"#,
        ] {
            assert_eq!(shape.read(&shaped(middle)), None, "{middle:?}");
        }
        assert_eq!(shape.read(b"{}"), None);
        // Two text values leave no shape to keep.
        let mut none = None;
        scan_like(
            br#"{"choices":[{"delta":{"content":"a","reasoning":"b"}}]}"#,
            false,
            &mut none,
        );
        assert!(none.is_none());
    }

    #[test]
    fn a_stream_read_with_shapes_answers_as_chunk_by_chunk() {
        let streams = [
            include_str!("../../tests/fixtures/stream-reasoning-then-content.sse"),
            include_str!("../../tests/fixtures/stream-busy-error.sse"),
        ];
        for stream in streams {
            let mut reader = Reader::default();
            let mut output_began = false;
            for line in stream.lines() {
                let Some(data) = line.strip_prefix("data:").map(str::trim) else {
                    continue;
                };
                let expected = parse(data.as_bytes(), !output_began);
                assert_eq!(reader.parse(data.as_bytes(), !output_began), expected);
                if let Ok(Parsed::Chunk(chunk)) = expected {
                    output_began |= chunk.is_output();
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        /// However the texts of a stream are made, a reader that remembers shapes
        /// answers every chunk as the stateless parse does.
        #[test]
        fn remembering_shapes_never_changes_an_answer(
            middles in prop::collection::vec(
                prop::collection::vec(
                    prop_oneof![
                        prop::sample::select(vec![
                            &b"tok"[..], "番茄".as_bytes(), b"\"", b"\\", b"\\\"", b"\\n",
                            b"\\u4e2d", b"\\ud83d", b"\\ude00", b"\x01", b"\xe4\xb8", b"}",
                            b"]", b",", b":", b"\"content\"", b"null", b" ",
                        ]).prop_map(<[u8]>::to_vec),
                        any::<u8>().prop_map(|b| vec![b]),
                    ],
                    0..6,
                ).prop_map(|pieces| pieces.concat()),
                1..12,
            ),
            want_meta in prop::collection::vec(any::<bool>(), 12),
        ) {
            let mut reader = Reader::default();
            for (middle, want_meta) in middles.iter().zip(want_meta) {
                let bytes = shaped(middle);
                prop_assert_eq!(reader.parse(&bytes, want_meta), parse(&bytes, want_meta));
            }
        }
    }

    /// JSON-ish text built from the pieces chunks are made of, right and wrong.
    fn value(depth: u32) -> BoxedStrategy<String> {
        let strings = prop::sample::select(vec![
            r#""""#,
            r#""tok ""#,
            r#""番茄炒蛋""#,
            r#""番茄炒蛋 and a run longer than eight bytes\" then more""#,
            "\"seventeen bytes..\u{1f}\"",
            r#""a\"b\\c\/d\n\t\r\b\f""#,
            r#""\u4e2d\u0041""#,
            r#""\ud83d\ude00""#,
            r#""\ud800""#,
            r#""\x""#,
            "\"\u{1}\"",
            r#""unterminated"#,
        ])
        .prop_map(str::to_owned);
        let scalars = prop::sample::select(vec![
            "null", "true", "false", "0", "-1", "12.5", "1e9", "-0.0E-2", "01", "1.", "nul",
        ])
        .prop_map(str::to_owned);
        let leaf = prop_oneof![strings, scalars].boxed();
        if depth == 0 {
            return leaf;
        }
        let inner = value(depth - 1);
        prop_oneof![
            3 => leaf,
            1 => prop::collection::vec(inner.clone(), 0..3).prop_map(|v| format!("[{}]", v.join(","))),
            2 => prop::collection::vec((key(), inner), 0..4)
                .prop_map(|fields: Vec<(String, String)>| object(&fields)),
        ]
        .boxed()
    }

    fn key() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "choices",
            "delta",
            "message",
            "content",
            "reasoning_content",
            "reasoning",
            "finish_reason",
            "usage",
            "error",
            "id",
            "model",
            "index",
            "role",
            "object",
        ])
        .prop_map(str::to_owned)
    }

    fn object(fields: &[(String, String)]) -> String {
        let fields: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
        format!("{{{}}}", fields.join(","))
    }

    /// A chunk-shaped object: top-level keys, often a `choices` array of choices
    /// with deltas, values from `value`.
    fn chunk() -> impl Strategy<Value = String> {
        let delta = prop::collection::vec((key(), value(1)), 0..4)
            .prop_map(|f: Vec<(String, String)>| object(&f))
            .boxed();
        let choice = prop::collection::vec(
            prop_oneof![
                (Just("delta".to_owned()), delta.clone()),
                (Just("message".to_owned()), delta),
                (key(), value(1)),
            ],
            0..3,
        )
        .prop_map(|f: Vec<(String, String)>| object(&f));
        let choices =
            prop::collection::vec(choice, 0..3).prop_map(|c| format!("[{}]", c.join(",")));
        prop::collection::vec(
            prop_oneof![
                2 => (Just("choices".to_owned()), choices),
                3 => (key(), value(2)),
            ],
            0..5,
        )
        .prop_map(|f: Vec<(String, String)>| object(&f))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        #[test]
        fn the_scanner_never_disagrees_with_serde(
            text in chunk(),
            spaces in prop::collection::vec(prop::sample::select(vec!["", " ", "\n", "\t "]), 0..8),
            cut in any::<prop::sample::Index>(),
            cutting in any::<bool>(),
            want_meta in any::<bool>(),
        ) {
            // Whitespace after some structural characters.
            let mut spaced = String::new();
            let mut spaces = spaces.iter().cycle();
            for c in text.chars() {
                spaced.push(c);
                if matches!(c, '{' | '[' | ',' | ':') {
                    spaced.push_str(spaces.next().copied().unwrap_or(""));
                }
            }
            let text = if cutting {
                let at = cut.index(spaced.len() + 1);
                spaced.get(..at).unwrap_or(&spaced).to_owned()
            } else {
                spaced
            };
            let _ = agrees(&text, want_meta);
        }
    }
}
