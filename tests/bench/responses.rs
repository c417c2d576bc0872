//! The Responses API against the chat route (issue 35): the same 20-chunk
//! upstream stream asked for through `POST /v1/chat/completions` and through a
//! streamed `POST /v1/responses` (stored, the default, and with `store: false`),
//! in one run, rounds alternating. What is compared is ladle's CPU per stream and
//! the time to the first delta.

use std::time::Instant;

use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::Semaphore;

use crate::load::{self, quantile};
use crate::procs::{self, Proc};

/// Streams per round and route.
const STREAMS: usize = 400;
/// Rounds per route.
const ROUNDS: usize = 5;
/// Streams in flight at once.
const CONCURRENCY: usize = 10;

/// One route's figures, medians over rounds.
struct Route {
    cpu_ms: Vec<f64>,
    first_delta_ms: Vec<f64>,
    errors: usize,
}

/// Every route.
pub struct Compared {
    chat: Route,
    responses: Route,
    unstored: Route,
}

/// Runs both routes through one ladle in front of a mock of its own, which
/// writes 20 chunks 1 ms apart to a request that names no shape (a Responses
/// create can name none: its unknown fields are refused).
pub async fn run(ticks: u64) -> Result<Compared, String> {
    let mock = procs::start_mock_with(20, 1)?;
    let ladle = procs::start_ladle(mock.addr, &[])?;
    let client = crate::load::client();
    let chat = (
        format!("http://{}/v1/chat/completions", ladle.addr),
        Bytes::from_static(
            br#"{"model":"m","stream":true,"messages":[{"role":"user","content":"bench"}]}"#,
        ),
    );
    let responses = (
        format!("http://{}/v1/responses", ladle.addr),
        Bytes::from_static(br#"{"model":"m","stream":true,"input":"bench"}"#),
    );
    let unstored = (
        responses.0.clone(),
        Bytes::from_static(br#"{"model":"m","stream":true,"store":false,"input":"bench"}"#),
    );
    let mut compared = Compared {
        chat: Route::new(),
        responses: Route::new(),
        unstored: Route::new(),
    };
    // Every one warmed first.
    for route in [&chat, &responses, &unstored] {
        round(&client, &ladle, route, ticks, 50).await;
    }
    for _ in 0..ROUNDS {
        for (route, figures) in [
            (&chat, &mut compared.chat),
            (&responses, &mut compared.responses),
            (&unstored, &mut compared.unstored),
        ] {
            let (cpu, firsts, errors) = round(&client, &ladle, route, ticks, STREAMS).await;
            figures.add(cpu, firsts, errors);
        }
    }
    Ok(compared)
}

/// `n` streams of `route`: ladle's CPU per stream (ms), the first-delta times
/// (ms, sorted) and the errors.
async fn round(
    client: &reqwest::Client,
    ladle: &Proc,
    (url, body): &(String, Bytes),
    ticks: u64,
    n: usize,
) -> (f64, Vec<f64>, usize) {
    let before = ladle.cpu_ns(ticks);
    let gate = std::sync::Arc::new(Semaphore::new(CONCURRENCY));
    let streams: Vec<_> = (0..n)
        .map(|_| {
            let (client, url, body, gate) =
                (client.clone(), url.clone(), body.clone(), gate.clone());
            tokio::spawn(async move {
                let _slot = gate.acquire_owned().await.ok()?;
                first_delta(&client, &url, body).await
            })
        })
        .collect();
    let (mut firsts, mut errors) = (Vec::with_capacity(n), 0);
    for stream in streams {
        match stream.await.ok().flatten() {
            Some(ms) => firsts.push(ms),
            None => errors += 1,
        }
    }
    let cpu_ms = ladle.cpu_ns(ticks).saturating_sub(before) as f64 / 1e6 / n as f64;
    firsts.sort_by(f64::total_cmp);
    (cpu_ms, firsts, errors)
}

/// Time to the first `tok ` delta, ms; `None` unless the stream ends whole
/// (`[DONE]` on chat, `response.completed` on the Responses API).
async fn first_delta(client: &reqwest::Client, url: &str, body: Bytes) -> Option<f64> {
    let sent = Instant::now();
    let response = load::post_json(client, url, body).send().await.ok()?;
    let mut stream = response.bytes_stream();
    let (mut first, mut tail) = (None, Vec::new());
    while let Some(bytes) = stream.next().await {
        let bytes = bytes.ok()?;
        if first.is_none() && bytes.windows(4).any(|w| w == b"tok ") {
            first = Some(sent.elapsed().as_secs_f64() * 1000.0);
        }
        tail.extend_from_slice(&bytes);
        let keep = tail.len().saturating_sub(4096);
        tail.drain(..keep);
    }
    let text = String::from_utf8_lossy(&tail);
    let whole = text.contains("[DONE]") || text.contains("response.completed");
    first.filter(|_| whole)
}

impl Route {
    fn new() -> Route {
        Route {
            cpu_ms: Vec::new(),
            first_delta_ms: Vec::new(),
            errors: 0,
        }
    }

    fn add(&mut self, cpu_ms: f64, firsts: Vec<f64>, errors: usize) {
        self.cpu_ms.push(cpu_ms);
        self.first_delta_ms.push(quantile(&firsts, 0.5));
        self.errors += errors;
    }

    fn median(values: &[f64]) -> f64 {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        quantile(&sorted, 0.5)
    }
}

impl Compared {
    /// The report's section.
    pub fn render(&self) -> String {
        let chat_cpu = Route::median(&self.chat.cpu_ms);
        let chat_first = Route::median(&self.chat.first_delta_ms);
        let mut text = format!(
            "### A streamed Responses create against the chat route ({ROUNDS} rounds of {STREAMS} 20-chunk streams, {CONCURRENCY} at once)\n\n\
             | route | CPU ms/stream | first delta p50 ms | errors |\n|---|---|---|---|\n\
             | chat | {chat_cpu:.3} | {chat_first:.3} | {} |\n",
            self.chat.errors,
        );
        for (name, route) in [
            ("responses (stored)", &self.responses),
            ("responses (`store: false`)", &self.unstored),
        ] {
            let (cpu, first) = (
                Route::median(&route.cpu_ms),
                Route::median(&route.first_delta_ms),
            );
            text.push_str(&format!(
                "| {name} | {cpu:.3} ({:.2}×) | {first:.3} ({:.2}×) | {} |\n",
                cpu / chat_cpu,
                first / chat_first,
                route.errors,
            ));
        }
        text
    }
}
