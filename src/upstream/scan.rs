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
/// means "ask serde_json", never "malformed".
pub fn scan(text: &str, want_meta: bool) -> Option<Chunk> {
    let mut cursor = Cursor {
        bytes: text.as_bytes(),
        at: 0,
    };
    let chunk = cursor.top(want_meta)?;
    cursor.space();
    (cursor.at == cursor.bytes.len()).then_some(chunk)
}

/// The bytes a string's plain run ends at: its quote, a backslash, and control
/// characters (which JSON forbids inside strings).
static STOPS_A_STRING: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = true;
        byte += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table
};

/// Deepest nesting skipped before stepping aside (serde_json allows 128).
const MAX_DEPTH: usize = 32;

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
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
        chunk.meta = want_meta.then_some(meta);
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
                    content = this.nullable_string(true)?;
                }
                b"reasoning_content" => {
                    seen.first(1)?;
                    reasoning_content = this.nullable_string(true)?;
                }
                b"reasoning" => {
                    seen.first(2)?;
                    reasoning = this.nullable_string(true)?;
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
        let raw = std::str::from_utf8(&self.bytes[span.start..span.end]).ok()?;
        Some(Some(if span.escaped {
            unescape(raw)?
        } else {
            raw.to_owned()
        }))
    }

    /// A string starting at the cursor; checks its escapes and that it holds no
    /// control characters, as JSON requires.
    fn string(&mut self) -> Option<Span> {
        self.expect(b'"')?;
        let start = self.at;
        let mut escaped = false;
        loop {
            // Runs of plain bytes are skipped in one tight loop.
            let rest = self.bytes.get(self.at..)?;
            let stop = rest.iter().position(|&b| STOPS_A_STRING[usize::from(b)])?;
            self.at += stop;
            match self.next()? {
                b'"' => {
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

    use super::scan;
    use crate::upstream::chunk::{Parsed, parse_with_serde};

    /// Whenever the scanner answers, serde_json gives the same chunk.
    fn agrees(text: &str, want_meta: bool) -> Option<()> {
        let chunk = scan(text, want_meta)?;
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
            assert_eq!(scan(text, true), None, "{text}");
        }
    }

    /// JSON-ish text built from the pieces chunks are made of, right and wrong.
    fn value(depth: u32) -> BoxedStrategy<String> {
        let strings = prop::sample::select(vec![
            r#""""#,
            r#""tok ""#,
            r#""番茄炒蛋""#,
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
