//! A stream cut and continued (issue 34): a 20-chunk chat stream that the mock
//! cuts after chunk 10, continued by the same mock from the prefix ladle sends
//! (`prefix` dialect). What is timed is what a user waits for: from the cut (the
//! client has chunk 10) to the next delta the client sees, against the mock's own
//! time to its first chunk for the same continuation asked directly.

use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;

use crate::load::{self, quantile};
use crate::procs;

/// Requests per measured run, one at a time.
const REQUESTS: usize = 300;

/// What was measured.
pub struct Cut {
    /// Cut → next delta through ladle, ms, sorted.
    through_ladle: Vec<f64>,
    /// The mock's own time to first chunk of a continuation, ms, sorted.
    mock_alone: Vec<f64>,
    /// Requests that did not end with `[DONE]` and all 20 chunks.
    errors: usize,
}

/// Runs both measurements against the mock at `mock`.
pub async fn run(mock: std::net::SocketAddr) -> Result<Cut, String> {
    let ladle = procs::start_ladle(
        mock,
        &[("LADLE_UPSTREAM_CONTINUATION", "prefix".to_owned())],
    )?;
    let client = crate::load::client();
    let through = format!("http://{}/v1/chat/completions", ladle.addr);
    let direct = format!("http://{mock}/v1/chat/completions");
    let cut = Bytes::from_static(
        br#"{"model":"m","stream":true,"messages":[{"role":"user","content":"bench"}],"n_chunks":20,"gap_ms":1,"cut_at":10}"#,
    );
    let continuation = Bytes::from(format!(
        r#"{{"model":"m","stream":true,"messages":[{{"role":"user","content":"bench"}},{{"role":"assistant","content":"{}","prefix":true}}],"n_chunks":20,"gap_ms":1}}"#,
        "tok ".repeat(10)
    ));
    let mut measured = Cut {
        through_ladle: Vec::with_capacity(REQUESTS),
        mock_alone: Vec::with_capacity(REQUESTS),
        errors: 0,
    };
    // Warm both paths' connections first.
    for _ in 0..20 {
        let _ = gap_after(&client, &through, cut.clone(), 10, 20).await;
        let _ = gap_after(&client, &direct, continuation.clone(), 0, 10).await;
    }
    for _ in 0..REQUESTS {
        match gap_after(&client, &through, cut.clone(), 10, 20).await {
            Some(gap) => measured.through_ladle.push(gap),
            None => measured.errors += 1,
        }
        match gap_after(&client, &direct, continuation.clone(), 0, 10).await {
            Some(gap) => measured.mock_alone.push(gap),
            None => measured.errors += 1,
        }
    }
    measured.through_ladle.sort_by(f64::total_cmp);
    measured.mock_alone.sort_by(f64::total_cmp);
    drop(ladle);
    Ok(measured)
}

/// Streams one request; the ms between its `after`-th content chunk (for 0, its
/// sending) and the next one. `None` unless it ends with `[DONE]` having written
/// `chunks` content chunks.
async fn gap_after(
    client: &reqwest::Client,
    url: &str,
    body: Bytes,
    after: usize,
    chunks: usize,
) -> Option<f64> {
    let sent = Instant::now();
    let response = load::post_json(client, url, body).send().await.ok()?;
    let mut stream = response.bytes_stream();
    let mut text = Vec::new();
    let (mut seen, mut mark, mut gap) = (0, (after == 0).then_some(sent), None);
    while let Some(bytes) = stream.next().await {
        let bytes = bytes.ok()?;
        let now = Instant::now();
        text.extend_from_slice(&bytes);
        seen = count(&text, b"tok ");
        match mark {
            None if seen > after => gap = Some(Duration::ZERO),
            None if seen == after => mark = Some(now),
            Some(at) if gap.is_none() && seen > after => gap = Some(now - at),
            _ => {}
        }
    }
    let whole = text.ends_with(b"data: [DONE]\n\n") && seen == chunks;
    gap.filter(|_| whole).map(|gap| gap.as_secs_f64() * 1000.0)
}

fn count(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .filter(|w| *w == needle)
        .count()
}

impl Cut {
    /// The report's section.
    pub fn render(&self) -> String {
        let ms = |values: &[f64], p: f64| format!("{:.2} ms", quantile(values, p));
        let added = quantile(&self.through_ladle, 0.5) - quantile(&self.mock_alone, 0.5);
        format!(
            "### A stream cut at chunk 10 of 20 and continued ({REQUESTS} requests, one at a time)\n\n\
             | | p50 | p99 |\n|---|---|---|\n\
             | cut → next delta the client sees, through ladle | {} | {} |\n\
             | the mock's own time to first chunk of the continuation | {} | {} |\n\n\
             ladle adds {added:.2} ms at p50 (target ≤ 1 ms); errors: {}.\n",
            ms(&self.through_ladle, 0.5),
            ms(&self.through_ladle, 0.99),
            ms(&self.mock_alone, 0.5),
            ms(&self.mock_alone, 0.99),
            self.errors,
        )
    }
}
