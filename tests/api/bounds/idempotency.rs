//! Idempotency results in memory are bounded: one over 1 MiB is answered but not
//! kept, and all kept results together stay within `LADLE_IDEMPOTENCY_MAX_BYTES`,
//! the oldest going first.

use serde_json::Value;

use crate::support::mock_upstream::*;
use crate::support::*;

/// A whole answer writing `text` in pieces of at most 64 KiB.
fn answer_of(text: &str) -> Script {
    let pieces: Vec<&str> = text
        .as_bytes()
        .chunks(64 << 10)
        .map(|piece| std::str::from_utf8(piece).expect("ASCII"))
        .collect();
    sse_answer(&pieces)
}

/// A keyed whole-answer chat request: whether it was replayed, and its content.
async fn keyed(app: &Gateway, key: &str) -> (bool, String) {
    let response = app.chat_keyed(key).await;
    assert_eq!(response.status(), 200, "{key}");
    let again = replayed(&response);
    let body: Value = json_of(response).await;
    let content = body["choices"][0]["message"]["content"]
        .as_str()
        .expect("content")
        .to_owned();
    (again, content)
}

#[tokio::test]
async fn a_result_over_1_mib_is_answered_but_not_kept() {
    let app = Gateway::start().await;
    let big = "big".repeat(400_000); // 1.2 MB
    app.upstream()
        .push([answer_of(&big), answer_of(&big), sse_answer(&["小"])]);
    for round in ["first", "repeat"] {
        let (again, content) = keyed(&app, "big").await;
        assert!(!again, "{round}: run, not replayed");
        assert!(
            content == big,
            "{round}: {} bytes of content",
            content.len()
        );
    }
    assert_eq!(app.upstream().requests().len(), 2);
    // A small result under the same gateway is kept and replayed.
    assert_eq!(keyed(&app, "small").await, (false, "小".to_owned()));
    assert_eq!(keyed(&app, "small").await, (true, "小".to_owned()));
    assert_eq!(app.upstream().requests().len(), 3);
}

/// The bytes kept results may take together in the eviction test: two results
/// of about 1.2 KB fit, three do not.
const MAX_KEPT: usize = 3000;

#[tokio::test]
async fn the_oldest_kept_results_go_first_once_their_bytes_pass_the_limit() {
    let app = Gateway::with(|config| config.idempotency.max_bytes = MAX_KEPT).await;
    let text = |key: &str| format!("{key}:{}", "x".repeat(1000));
    for key in ["k1", "k2", "k3", "k1"] {
        app.upstream().push([answer_of(&text(key))]);
    }
    let first = app.chat_keyed("k1").await;
    let size = first.text().await.expect("the body").len();
    assert!(
        2 * size <= MAX_KEPT && 3 * size > MAX_KEPT,
        "a kept body of {size} bytes"
    );
    for key in ["k2", "k3"] {
        assert_eq!(keyed(&app, key).await, (false, text(key)));
    }
    // The newest are replayed; the oldest went, so it runs again.
    assert_eq!(keyed(&app, "k3").await, (true, text("k3")));
    assert_eq!(keyed(&app, "k2").await, (true, text("k2")));
    assert_eq!(app.upstream().requests().len(), 3);
    assert_eq!(keyed(&app, "k1").await, (false, text("k1")));
    assert_eq!(app.upstream().requests().len(), 4);
}
