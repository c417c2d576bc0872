//! Floods, for the bounds tests (contract 10): an upstream that writes content
//! without end, as fast as its socket takes it, and a reader that drains a long
//! answer to its end keeping only what a test looks at (its size, its tail, when
//! it ended), so the test's own memory stays small.

use futures_util::StreamExt;
use reqwest::Response;
use tokio::time::Instant;

use super::mock_upstream::{Script, Step, content, sse};

/// Bytes of text in each content delta of a flood.
pub const PIECE: usize = 1024;

/// Content deltas in one write of a flood.
const DELTAS_PER_WRITE: usize = 64;

/// The bytes a flood writes again and again: 64 SSE content deltas of 1 KiB of `x`.
pub fn flood_bytes() -> Vec<u8> {
    let event = format!("data: {}\n\n", content(&"x".repeat(PIECE)));
    event.repeat(DELTAS_PER_WRITE).into_bytes()
}

/// An event stream of content deltas without end.
pub fn flood() -> Script {
    sse(vec![Step::Flood(flood_bytes())])
}

/// The last bytes of a drained body that are kept.
const TAIL: usize = 64 << 10;

/// A body read to its end.
#[derive(Debug)]
pub struct Drained {
    /// Its size.
    pub bytes: usize,
    /// Its last 64 KiB, as text.
    pub tail: String,
    /// When its last byte came (or the body broke off).
    pub ended: Instant,
    /// Whether it ended cleanly (`false`: the connection broke off).
    pub whole: bool,
}

/// Reads `response`'s body to its end as fast as it comes, looking at nothing
/// but keeping its tail (a flood is read in the time the test measures: looking
/// through every byte of it would make the reader, not the gateway, late).
pub async fn drain(response: Response) -> Drained {
    let mut kept: Vec<u8> = Vec::with_capacity(4 * TAIL);
    let mut bytes = 0;
    let mut whole = true;
    let mut body = response.bytes_stream();
    while let Some(piece) = body.next().await {
        let Ok(piece) = piece else {
            whole = false;
            break;
        };
        bytes += piece.len();
        kept.extend_from_slice(&piece);
        if kept.len() > 3 * TAIL {
            kept.drain(..kept.len() - TAIL);
        }
    }
    let ended = Instant::now();
    let start = kept.len().saturating_sub(TAIL);
    Drained {
        bytes,
        tail: String::from_utf8_lossy(&kept[start..]).into_owned(),
        ended,
        whole,
    }
}
