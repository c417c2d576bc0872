//! Continuing a cut stream (contract 11.4) against mock upstreams that speak
//! each dialect: the continuation's body byte for byte; every failure kind
//! continued on every shape; the same upstream or the next one that
//! continues; every limit; what is kept and what is counted.

mod dialects;
mod kept;
mod kinds;
mod limits;

use ladle::config::UpstreamSettings;
use ladle::engine::upstream::continuation::Continuation;
use serde_json::Value;

use crate::support::continuing::{FIRST_ID, sse_chunks};
use crate::support::mock_upstream::MockUpstream;
use crate::support::*;

/// What every test's upstream was writing: a recipe step, in Chinese.
pub const TEXT: &str = "番茄炒蛋：先把蛋炒到半熟盛出，再炒番茄出汁，最后合炒，加一小勺糖提鲜。";

/// The first `n` characters of `TEXT`: what a cut stream had written.
pub fn written(n: usize) -> String {
    TEXT.chars().take(n).collect()
}

/// Upstream `name` of a list at `mock`, continuing in `dialect`.
pub fn continuing(
    name: &str,
    mock: &MockUpstream,
    priority: u32,
    dialect: Continuation,
) -> UpstreamSettings {
    UpstreamSettings {
        continuation: dialect,
        ..upstream(name, &mock.url, priority, 1)
    }
}

/// A gateway in front of one upstream, `a`, continuing in `dialect`.
pub async fn gateway_over(mock: &MockUpstream, dialect: Continuation) -> Gateway {
    Gateway::options()
        .upstreams(vec![continuing("a", mock, 0, dialect)])
        .start()
        .await
}

/// A gateway in front of `a` (priority 0) and `b` (priority 1), continuing in
/// `a_dialect` and `b_dialect`.
pub async fn gateway_over_two(
    a: &MockUpstream,
    a_dialect: Continuation,
    b: &MockUpstream,
    b_dialect: Continuation,
) -> Gateway {
    Gateway::options()
        .upstreams(vec![
            continuing("a", a, 0, a_dialect),
            continuing("b", b, 1, b_dialect),
        ])
        .start()
        .await
}

/// Asserts that a chat stream wrote `text` whole, as one completion: every
/// chunk under the first stream's id, model and `created`, one role delta, no
/// error, and `[DONE]` at the end.
pub fn assert_one_whole_stream(body: &str, text: &str) {
    let chunks: Vec<Value> = sse_chunks(body);
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
    assert!(chunks.iter().all(|c| c.get("error").is_none()), "{body}");
    for chunk in &chunks {
        assert_eq!(chunk["id"], FIRST_ID, "{chunk}");
        assert_eq!(chunk["model"], "first-model", "{chunk}");
        assert_eq!(chunk["created"], 1_700_000_000, "{chunk}");
    }
    let roles = chunks
        .iter()
        .filter(|c| c["choices"][0]["delta"].get("role").is_some())
        .count();
    assert_eq!(roles, 1, "{body}");
    assert_eq!(streamed_text(body), text);
}
