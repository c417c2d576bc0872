//! `ladle demo`: a simulated OpenAI-compatible upstream on a free loopback port.
//!
//! It behaves like the real one on a bad day, so a new user sees every mechanism
//! at work: it streams canned recipes and fridge ideas a few characters at a time,
//! some with reasoning first; every fourth request from the second on is told the
//! model is busy (in a 200 stream, as the real upstream does), which the gateway
//! retries after its back-off; one recipe writes nutrition as "forty-eight 克",
//! which the normalizer mends; and the recipe for 麻婆豆腐 stops halfway, as a
//! flaky upstream's stream does, while a request that carries what was written
//! as an assistant `prefix` (contract 11.4) gets the rest.

pub mod answers;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use bytes::Bytes;
use futures_util::{StreamExt, stream};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use self::answers::{CannedAnswer, FRIDGE, RECIPES};

/// The repository's prompts, built into the binary: the demo serves them when it
/// is started where there is no prompts folder.
const BUILT_IN_PROMPTS: [(&str, &str); 2] = [
    ("recipe.toml", include_str!("../../prompts/recipe.toml")),
    ("fridge.toml", include_str!("../../prompts/fridge.toml")),
];

/// Writes the built-in prompts into a fresh folder of the system's temporary
/// directory (the editor may change them there, for this run only); its path.
pub fn built_in_prompts() -> std::io::Result<std::path::PathBuf> {
    let folder = std::env::temp_dir().join(format!("ladle-demo-prompts-{}", std::process::id()));
    std::fs::create_dir_all(&folder)?;
    for (file, text) in BUILT_IN_PROMPTS {
        std::fs::write(folder.join(file), text)?;
    }
    Ok(folder)
}

/// How the simulated upstream paces and misbehaves.
#[derive(Debug, Clone, Copy)]
pub struct DemoOptions {
    /// Pause between streamed pieces.
    pub chunk_gap: Duration,
    /// Characters per streamed piece.
    pub chunk_chars: usize,
    /// Every n-th request is busy (0 = never).
    pub busy_every: u64,
}

impl Default for DemoOptions {
    fn default() -> Self {
        DemoOptions {
            chunk_gap: Duration::from_millis(12),
            chunk_chars: 3,
            busy_every: 4,
        }
    }
}

struct Demo {
    options: DemoOptions,
    requests: AtomicU64,
}

/// Starts the simulated upstream on `127.0.0.1:0`; returns its base URL.
pub async fn start(options: DemoOptions) -> std::io::Result<String> {
    let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
    let address = listener.local_addr()?;
    let demo = Arc::new(Demo {
        options,
        requests: AtomicU64::new(0),
    });
    let app = Router::new()
        .route("/v1/chat/completions", post(complete))
        .with_state(demo);
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app).await {
            tracing::error!(%error, "demo upstream stopped");
        }
    });
    Ok(format!("http://{address}/v1"))
}

/// The dish whose recipe the demo upstream cuts halfway.
pub const CUT_DISH: &str = "麻婆豆腐";

async fn complete(State(demo): State<Arc<Demo>>, body: Bytes) -> Response {
    let n = demo.requests.fetch_add(1, Ordering::Relaxed) + 1;
    let request: Value = serde_json::from_slice(&body).unwrap_or_default();
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let asked = messages
        .iter()
        .rfind(|m| m["role"] == "user")
        .map(|m| m["content"].to_string())
        .unwrap_or_default();
    let model = request["model"].as_str().unwrap_or("ladle-demo").to_owned();
    let mut events: Vec<String> = vec![chunk(
        &model,
        json!({"role": "assistant", "content": ""}),
        None,
    )];
    let answer = pick(&asked, n);
    let pieces = |text: &str| split_chars(text, demo.options.chunk_chars);
    let prefix = messages
        .last()
        .filter(|m| m["role"] == "assistant" && m["prefix"] == true)
        .map(|m| m["content"].as_str().unwrap_or_default());
    if let Some(prefix) = prefix {
        let Some(rest) = answer.content.strip_prefix(prefix) else {
            let refused = json!({"error": {"message": "the prefix is not this answer's start"}});
            return (axum::http::StatusCode::BAD_REQUEST, axum::Json(refused)).into_response();
        };
        events.extend(
            pieces(rest)
                .iter()
                .map(|p| chunk(&model, json!({ "content": p }), None)),
        );
        events.push(chunk(&model, json!({}), Some("stop")));
        events.push("[DONE]".to_owned());
        return sse(events, demo.options.chunk_gap);
    }
    // The second request is the first busy one: in the order `demo` prints its
    // lines, that is the streamed recipe, which shows the retry as an event.
    if demo.options.busy_every > 0 && n % demo.options.busy_every == 2 % demo.options.busy_every {
        events.push(
            json!({"error": {"code": "1305", "message": "当前模型访问量较大，请稍后重试"}})
                .to_string(),
        );
        return sse(events, demo.options.chunk_gap);
    }
    for piece in pieces(answer.reasoning) {
        events.push(chunk(&model, json!({ "reasoning_content": piece }), None));
    }
    let content = pieces(answer.content);
    // Cut halfway: the body ends with no finish and no `[DONE]`.
    let cut = asked.contains(CUT_DISH).then_some(content.len() / 2);
    for piece in content.iter().take(cut.unwrap_or(usize::MAX)) {
        events.push(chunk(&model, json!({ "content": piece }), None));
    }
    if cut.is_some() {
        return sse(events, demo.options.chunk_gap);
    }
    events.push(chunk(&model, json!({}), Some("stop")));
    events.push("[DONE]".to_owned());
    sse(events, demo.options.chunk_gap)
}

/// A fridge answer when the caller lists what is in the fridge; else the recipe
/// whose title the caller named, or the next one in turn.
fn pick(asked: &str, n: u64) -> &'static CannedAnswer {
    if asked.contains("冰箱") {
        return &FRIDGE[(n as usize) % FRIDGE.len()];
    }
    RECIPES
        .iter()
        .find(|r| title_of(r).is_some_and(|t| asked.contains(t)))
        .unwrap_or(&RECIPES[(n as usize) % RECIPES.len()])
}

fn title_of(answer: &CannedAnswer) -> Option<&str> {
    let start = answer.content.find("\"title\"")?;
    let rest = &answer.content[start + 7..];
    let open = rest.find('"')? + 1;
    let close = rest[open..].find('"')? + open;
    Some(&rest[open..close])
}

fn chunk(model: &str, delta: Value, finish_reason: Option<&str>) -> String {
    json!({
        "id": "chatcmpl-demo",
        "object": "chat.completion.chunk",
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    })
    .to_string()
}

fn split_chars(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(size.max(1))
        .map(|c| c.iter().collect())
        .collect()
}

fn sse(events: Vec<String>, gap: Duration) -> Response {
    let body = stream::iter(events).then(move |event| async move {
        if !gap.is_zero() {
            tokio::time::sleep(gap).await;
        }
        Ok::<_, std::convert::Infallible>(Bytes::from(format!("data: {event}\n\n")))
    });
    (
        [(header::CONTENT_TYPE, "text/event-stream")],
        Body::from_stream(body),
    )
        .into_response()
}
