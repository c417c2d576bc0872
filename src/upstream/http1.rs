//! HTTP/1.1 as ladle speaks it to an upstream: one POST out, one response in.
//!
//! Pure: bytes in, decisions out; the socket work is in `exchange`. ladle sends one
//! request shape and needs from the answer only its status, two headers and the
//! body's framing, so this is small; hyper's client connection, which it replaces,
//! ran a dispatcher and a body channel per response and decoded chunk framing a
//! byte at a time, and that was a fifth of the relay's work per chunk. The head is
//! parsed by httparse, the parser hyper itself uses.

use bytes::{Buf, Bytes, BytesMut};

use super::BodyKind;

/// The request head up to the body's length: written once per upstream, since it
/// carries the key; deliberately not `Debug`.
pub struct RequestHead {
    prefix: Box<[u8]>,
}

impl RequestHead {
    /// `POST {path}` to `host` as JSON, asking for SSE, with an optional
    /// `Authorization` value; `Err` names the part that cannot go in a header.
    pub fn new(path: &str, host: &str, authorization: Option<&str>) -> Result<Self, String> {
        let mut head = format!(
            "POST {path} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n\
             accept: text/event-stream, application/json\r\n"
        );
        if let Some(value) = authorization {
            if !is_header_text(value) {
                return Err("the upstream key is not a valid header value".into());
            }
            head.push_str("authorization: ");
            head.push_str(value);
            head.push_str("\r\n");
        }
        if !is_header_text(path) || !is_header_text(host) || path.contains(' ') {
            return Err("the upstream URL has characters a request line cannot carry".into());
        }
        head.push_str("content-length: ");
        Ok(RequestHead {
            prefix: head.into_bytes().into_boxed_slice(),
        })
    }

    /// The whole request, head and body, ready for one write.
    pub fn encode(&self, body: &[u8]) -> Vec<u8> {
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        let mut n = body.len();
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let length = &digits[at..];
        let mut out = Vec::with_capacity(self.prefix.len() + length.len() + 4 + body.len());
        out.extend_from_slice(&self.prefix);
        out.extend_from_slice(length);
        out.extend_from_slice(b"\r\n\r\n");
        out.extend_from_slice(body);
        out
    }
}

fn is_header_text(text: &str) -> bool {
    text.bytes()
        .all(|b| b == b'\t' || (b' '..0x7f).contains(&b))
}

/// What the response head says.
#[derive(Debug, PartialEq, Eq)]
pub struct ResponseHead {
    pub status: u16,
    pub kind: BodyKind,
    /// `Retry-After` as written; the caller reads the clock to interpret a date.
    pub retry_after: Option<Box<str>>,
    pub body: BodyDecoder,
    /// Whether the connection may carry another request once the body has ended.
    pub reusable: bool,
}

/// A head that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    #[error("the upstream sent a malformed response head ({0})")]
    Malformed(String),
    #[error("the upstream's response head is longer than {MAX_HEAD} bytes")]
    TooLong,
}

/// Longest response head accepted, interim heads included.
pub const MAX_HEAD: usize = 64 * 1024;
const MAX_HEADERS: usize = 64;

/// Parses and removes one final response head from the front of `buf`, skipping
/// interim (1xx) heads; `Ok(None)` when more bytes are needed.
pub fn take_head(buf: &mut BytesMut) -> Result<Option<ResponseHead>, HeadError> {
    loop {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut response = httparse::Response::new(&mut headers);
        let length = match response.parse(buf) {
            Ok(httparse::Status::Complete(length)) => length,
            Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => {
                return Err(HeadError::TooLong);
            }
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(error) => return Err(HeadError::Malformed(error.to_string())),
        };
        let status = response.code.unwrap_or(0);
        if (100..200).contains(&status) && status != 101 {
            buf.advance(length);
            continue;
        }
        let head = read_head(status, response.version == Some(1), response.headers)?;
        buf.advance(length);
        return Ok(Some(head));
    }
}

fn read_head(
    status: u16,
    http11: bool,
    headers: &[httparse::Header<'_>],
) -> Result<ResponseHead, HeadError> {
    let mut kind = BodyKind::Unknown;
    let mut retry_after = None;
    let mut chunked = None;
    let mut length = None;
    let mut reusable = http11;
    for header in headers {
        let name = header.name;
        // Only the few headers read here are decoded.
        let value = || std::str::from_utf8(header.value).unwrap_or("").trim();
        if name.eq_ignore_ascii_case("content-type") {
            kind = super::body_kind(value());
        } else if name.eq_ignore_ascii_case("retry-after") {
            retry_after = Some(value().into());
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            let last = value().rsplit(',').next().unwrap_or("").trim();
            chunked = Some(last.eq_ignore_ascii_case("chunked"));
        } else if name.eq_ignore_ascii_case("content-length") {
            let value = value();
            let parsed: u64 = value
                .parse()
                .map_err(|_| HeadError::Malformed(format!("content-length `{value}`")))?;
            if length.is_some_and(|earlier| earlier != parsed) {
                return Err(HeadError::Malformed("two different content-lengths".into()));
            }
            length = Some(parsed);
        } else if name.eq_ignore_ascii_case("connection") {
            let value = value();
            if has_token(value, "close") {
                reusable = false;
            } else if has_token(value, "keep-alive") {
                reusable = true;
            }
        }
    }
    let body = match (chunked, length) {
        _ if status == 204 || status == 304 => BodyDecoder::Length(0),
        (Some(true), _) => BodyDecoder::Chunked(Chunked::Size),
        (Some(false), _) | (None, None) => BodyDecoder::UntilClose,
        (None, Some(length)) => BodyDecoder::Length(length),
    };
    // A body that ends only when the socket does leaves nothing to reuse; so does
    // a head with both framings, which the RFC asks us to distrust.
    let reusable =
        reusable && body != BodyDecoder::UntilClose && !(chunked.is_some() && length.is_some());
    Ok(ResponseHead {
        status,
        kind,
        retry_after,
        body,
        reusable,
    })
}

fn has_token(value: &str, token: &str) -> bool {
    value
        .split(',')
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// How the body is framed, and how far through it the reader is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyDecoder {
    /// `Transfer-Encoding: chunked`.
    Chunked(Chunked),
    /// `Content-Length`: the bytes still to come.
    Length(u64),
    /// Neither: the body ends when the upstream closes the connection.
    UntilClose,
}

/// Where the chunked decoder stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chunked {
    /// Before a chunk-size line.
    Size,
    /// Inside a chunk's data, with this many bytes still to come.
    Data(u64),
    /// After a chunk's data, before its line end.
    DataEnd,
    /// After the last chunk, in the trailer section.
    Trailers,
}

/// One step of the body.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Body bytes, in the order sent.
    Data(Bytes),
    /// The buffer holds no complete step; read more.
    NeedMore,
    /// The body has ended; the bytes after it were left in the buffer.
    End,
}

/// A body the framing rules reject.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    #[error("the upstream broke the chunked encoding ({0})")]
    Chunked(&'static str),
    #[error("the upstream closed the connection before the body ended")]
    Truncated,
}

/// Longest chunk-size or trailer line accepted.
const MAX_LINE: usize = 4096;

impl BodyDecoder {
    /// Takes the next step's bytes off the front of `buf`.
    pub fn step(&mut self, buf: &mut BytesMut) -> Result<Step, BodyError> {
        match self {
            BodyDecoder::Length(0) => Ok(Step::End),
            BodyDecoder::Length(left) => Ok(match take_up_to(buf, left) {
                Some(data) => Step::Data(data),
                None => Step::NeedMore,
            }),
            BodyDecoder::UntilClose if buf.is_empty() => Ok(Step::NeedMore),
            BodyDecoder::UntilClose => Ok(Step::Data(buf.split().freeze())),
            BodyDecoder::Chunked(state) => state.step(buf),
        }
    }

    /// The upstream closed the connection: whether that ends the body or cuts it.
    pub fn at_eof(&self) -> Result<(), BodyError> {
        match self {
            BodyDecoder::UntilClose | BodyDecoder::Length(0) => Ok(()),
            _ => Err(BodyError::Truncated),
        }
    }
}

/// Up to `*left` bytes from the front of `buf`, counting them off; `None` if empty.
fn take_up_to(buf: &mut BytesMut, left: &mut u64) -> Option<Bytes> {
    if buf.is_empty() {
        return None;
    }
    let take = usize::try_from(*left).map_or(buf.len(), |left| left.min(buf.len()));
    *left -= take as u64;
    Some(buf.split_to(take).freeze())
}

impl Chunked {
    fn step(&mut self, buf: &mut BytesMut) -> Result<Step, BodyError> {
        loop {
            match *self {
                Chunked::Size => {
                    let Some(size) = take_line(buf, chunk_size)? else {
                        return Ok(Step::NeedMore);
                    };
                    *self = if size == 0 {
                        Chunked::Trailers
                    } else {
                        Chunked::Data(size)
                    };
                }
                Chunked::Data(mut left) => {
                    let Some(data) = take_up_to(buf, &mut left) else {
                        return Ok(Step::NeedMore);
                    };
                    *self = if left == 0 {
                        Chunked::DataEnd
                    } else {
                        Chunked::Data(left)
                    };
                    return Ok(Step::Data(data));
                }
                Chunked::DataEnd => match buf.first() {
                    None => return Ok(Step::NeedMore),
                    Some(b'\n') => {
                        buf.advance(1);
                        *self = Chunked::Size;
                    }
                    Some(b'\r') if buf.len() < 2 => return Ok(Step::NeedMore),
                    Some(b'\r') if buf[1] == b'\n' => {
                        buf.advance(2);
                        *self = Chunked::Size;
                    }
                    Some(_) => return Err(BodyError::Chunked("no line end after a chunk")),
                },
                Chunked::Trailers => {
                    let Some(empty) = take_line(buf, |line| Ok(line.is_empty()))? else {
                        return Ok(Step::NeedMore);
                    };
                    if empty {
                        return Ok(Step::End);
                    }
                }
            }
        }
    }
}

/// Reads one line off the front of `buf` with `read`, which sees it without its
/// `\r\n` (or bare `\n`); `None` while the line is incomplete.
fn take_line<T>(
    buf: &mut BytesMut,
    read: impl FnOnce(&[u8]) -> Result<T, BodyError>,
) -> Result<Option<T>, BodyError> {
    let Some(end) = memchr::memchr(b'\n', buf) else {
        return if buf.len() > MAX_LINE {
            Err(BodyError::Chunked("a line too long"))
        } else {
            Ok(None)
        };
    };
    let line = &buf[..end];
    let value = read(line.strip_suffix(b"\r").unwrap_or(line))?;
    buf.advance(end + 1);
    Ok(Some(value))
}

/// The size of a chunk-size line (`1a;ext=x`): hex digits, extensions ignored.
fn chunk_size(line: &[u8]) -> Result<u64, BodyError> {
    let digits = line.split(|b| *b == b';').next().unwrap_or(b"");
    let digits = digits.trim_ascii();
    if digits.is_empty() || digits.len() > 15 {
        return Err(BodyError::Chunked("a bad chunk size"));
    }
    digits.iter().try_fold(0u64, |size, digit| {
        let value = (*digit as char)
            .to_digit(16)
            .ok_or(BodyError::Chunked("a bad chunk size"))?;
        Ok(size << 4 | u64::from(value))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn head(text: &str) -> Result<Option<ResponseHead>, HeadError> {
        take_head(&mut BytesMut::from(text))
    }

    fn parsed(text: &str) -> ResponseHead {
        head(text).expect("a valid head").expect("a complete head")
    }

    /// Feeds `wire` to a fresh decoder in pieces cut at `cuts`; the body and the
    /// bytes left after it.
    fn decode_in_pieces(
        mut decoder: BodyDecoder,
        wire: &[u8],
        cuts: &[usize],
    ) -> Result<(Vec<u8>, Vec<u8>), BodyError> {
        let mut buf = BytesMut::new();
        let mut body = Vec::new();
        let mut fed = 0;
        let mut cuts = cuts.iter().copied().chain([wire.len()]);
        loop {
            match decoder.step(&mut buf)? {
                Step::Data(data) => body.extend_from_slice(&data),
                Step::End => return Ok((body, buf.to_vec())),
                Step::NeedMore => {
                    let Some(cut) = cuts.next() else {
                        decoder.at_eof()?;
                        return Ok((body, Vec::new()));
                    };
                    let cut = cut.clamp(fed, wire.len());
                    buf.extend_from_slice(&wire[fed..cut]);
                    fed = cut;
                }
            }
        }
    }

    fn chunked(pieces: &[&[u8]]) -> Vec<u8> {
        let mut wire = Vec::new();
        for piece in pieces {
            wire.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
            wire.extend_from_slice(piece);
            wire.extend_from_slice(b"\r\n");
        }
        wire.extend_from_slice(b"0\r\n\r\n");
        wire
    }

    #[test]
    fn the_request_carries_length_key_and_body() {
        let head = RequestHead::new("/v1/chat/completions", "up:8080", Some("Bearer sk-1"))
            .expect("valid head");
        let wire = String::from_utf8(head.encode(b"{\"a\":1}")).expect("text");
        assert_eq!(
            wire,
            "POST /v1/chat/completions HTTP/1.1\r\nhost: up:8080\r\n\
             content-type: application/json\r\naccept: text/event-stream, application/json\r\n\
             authorization: Bearer sk-1\r\ncontent-length: 7\r\n\r\n{\"a\":1}"
        );
        assert!(RequestHead::new("/p", "h", Some("Bearer a\r\nx: y")).is_err());
        assert!(RequestHead::new("/p q", "h", None).is_err());
    }

    #[test]
    fn a_head_gives_status_kind_retry_after_and_framing() {
        let head = parsed(
            "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n\
             Retry-After: 7\r\nContent-Length: 12\r\n\r\n",
        );
        assert_eq!(head.status, 429);
        assert_eq!(head.kind, BodyKind::Json);
        assert_eq!(head.retry_after.as_deref(), Some("7"));
        assert_eq!(head.body, BodyDecoder::Length(12));
        assert!(head.reusable);
        let head = parsed(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
             transfer-encoding: chunked\r\n\r\n",
        );
        assert_eq!(
            (head.kind, head.body),
            (BodyKind::EventStream, BodyDecoder::Chunked(Chunked::Size))
        );
    }

    #[test]
    fn only_a_cleanly_framed_keep_alive_answer_leaves_a_reusable_connection() {
        let reusable = |text: &str| parsed(text).reusable;
        assert!(!reusable("HTTP/1.1 200 OK\r\n\r\n"), "ends at close");
        assert!(!reusable(
            "HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"
        ));
        assert!(!reusable("HTTP/1.0 200 OK\r\ncontent-length: 0\r\n\r\n"));
        assert!(reusable(
            "HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 0\r\n\r\n"
        ));
        assert!(!reusable(
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: 3\r\n\r\n"
        ));
        assert_eq!(
            parsed("HTTP/1.1 204 No Content\r\n\r\n").body,
            BodyDecoder::Length(0)
        );
    }

    #[test]
    fn interim_heads_are_skipped_and_partial_heads_wait() {
        let mut buf = BytesMut::from(
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nhi",
        );
        let final_head = take_head(&mut buf).expect("valid").expect("complete");
        assert_eq!(final_head.status, 200);
        assert_eq!(&buf[..], b"hi");
        assert_eq!(head("HTTP/1.1 200 OK\r\ncontent-"), Ok(None));
    }

    #[test]
    fn broken_heads_are_errors() {
        assert!(matches!(
            head("HTTP/1.1 OK\r\n\r\n"),
            Err(HeadError::Malformed(_))
        ));
        assert!(matches!(
            head("HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n"),
            Err(HeadError::Malformed(_))
        ));
        assert!(matches!(
            head("HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n"),
            Err(HeadError::Malformed(_))
        ));
        let endless = format!("HTTP/1.1 200 OK\r\nx: {}", "a".repeat(MAX_HEAD));
        assert_eq!(head(&endless), Err(HeadError::TooLong));
    }

    #[test]
    fn chunked_bodies_decode_with_extensions_trailers_and_bare_line_feeds() {
        let wire = b"4;name=v\r\ndata\r\n3\nabc\n0\r\nx-trailer: 1\r\n\r\nNEXT";
        let (body, rest) =
            decode_in_pieces(BodyDecoder::Chunked(Chunked::Size), wire, &[]).expect("decodes");
        assert_eq!((&body[..], &rest[..]), (&b"dataabc"[..], &b"NEXT"[..]));
    }

    #[test]
    fn broken_chunked_framing_is_an_error() {
        let decode = |wire: &[u8]| {
            decode_in_pieces(BodyDecoder::Chunked(Chunked::Size), wire, &[]).map(|(b, _)| b)
        };
        assert!(matches!(decode(b"zz\r\n"), Err(BodyError::Chunked(_))));
        assert!(matches!(
            decode(b"2\r\nabX\r\n"),
            Err(BodyError::Chunked(_))
        ));
        assert!(matches!(
            decode(b"ffffffffffffffff\r\n"),
            Err(BodyError::Chunked(_))
        ));
        assert!(matches!(
            decode(&[b'1'; MAX_LINE + 1]),
            Err(BodyError::Chunked(_))
        ));
        assert_eq!(decode(b"5\r\nab"), Err(BodyError::Truncated));
    }

    #[test]
    fn length_and_close_framed_bodies_end_where_they_should() {
        let (body, rest) =
            decode_in_pieces(BodyDecoder::Length(3), b"abcdef", &[1]).expect("decodes");
        assert_eq!((&body[..], &rest[..]), (&b"abc"[..], &b"def"[..]));
        assert_eq!(
            decode_in_pieces(BodyDecoder::Length(5), b"abc", &[]),
            Err(BodyError::Truncated)
        );
        let (body, _) =
            decode_in_pieces(BodyDecoder::UntilClose, b"all of it", &[3]).expect("decodes");
        assert_eq!(body, b"all of it");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// However the bytes are cut, a chunked body decodes to what was sent and
        /// leaves what followed it.
        #[test]
        fn chunked_decoding_does_not_depend_on_how_bytes_arrive(
            pieces in prop::collection::vec(prop::collection::vec(any::<u8>(), 1..300), 0..8),
            mut cuts in prop::collection::vec(0usize..3000, 0..12),
        ) {
            let refs: Vec<&[u8]> = pieces.iter().map(Vec::as_slice).collect();
            let mut wire = chunked(&refs);
            wire.extend_from_slice(b"HTTP/1.1");
            cuts.sort_unstable();
            let (body, rest) =
                decode_in_pieces(BodyDecoder::Chunked(Chunked::Size), &wire, &cuts)
                    .expect("decodes");
            prop_assert_eq!(body, pieces.concat());
            prop_assert!(b"HTTP/1.1".starts_with(&rest));
        }
    }
}
