//! A webhook receiver the test controls: a real HTTP server (axum) on a free
//! loopback port that records every delivery (headers and body) and answers each
//! with the next status of its script (the last one repeats; `0` never answers,
//! as a receiver that hangs).

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use tokio::net::TcpListener;

/// One delivery attempt the receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    /// Its headers.
    pub headers: HeaderMap,
    /// Its body, as bytes (a signature covers them exactly).
    pub body: Bytes,
    /// When it arrived.
    pub at: tokio::time::Instant,
}

impl Received {
    /// A header's value as text.
    pub fn header(&self, name: &str) -> String {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON delivery")
    }
}

#[derive(Default)]
struct Inner {
    received: Vec<Received>,
    script: Vec<u16>,
    /// How long each answer takes.
    delay: std::time::Duration,
    /// Deliveries being answered now, and the most at once so far.
    inflight: usize,
    most_inflight: usize,
}

/// A running receiver.
#[derive(Clone)]
pub struct Receiver {
    /// Its URL.
    pub url: String,
    inner: Arc<Mutex<Inner>>,
}

impl Receiver {
    /// Starts a receiver answering `script` in turn (the last status repeats).
    pub async fn start(script: &[u16]) -> Receiver {
        Receiver::slow(script, std::time::Duration::ZERO).await
    }

    /// A receiver that takes `delay` over each answer.
    pub async fn slow(script: &[u16], delay: std::time::Duration) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the receiver");
        let address = listener.local_addr().expect("its address");
        let inner = Arc::new(Mutex::new(Inner {
            script: script.to_vec(),
            delay,
            ..Inner::default()
        }));
        let app = Router::new()
            .route("/hook", post(receive))
            .with_state(inner.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver {
            url: format!("http://{address}/hook"),
            inner,
        }
    }

    /// What it got so far.
    pub fn received(&self) -> Vec<Received> {
        self.inner.lock().expect("receiver lock").received.clone()
    }

    /// The most deliveries it was answering at once.
    pub fn most_at_once(&self) -> usize {
        self.inner.lock().expect("receiver lock").most_inflight
    }
}

async fn receive(
    State(inner): State<Arc<Mutex<Inner>>>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, HeaderMap) {
    let (status, delay) = {
        let mut inner = inner.lock().expect("receiver lock");
        inner.inflight += 1;
        inner.most_inflight = inner.most_inflight.max(inner.inflight);
        let turn = inner.received.len();
        inner.received.push(Received {
            headers,
            body,
            at: tokio::time::Instant::now(),
        });
        let status = inner
            .script
            .get(turn)
            .or(inner.script.last())
            .copied()
            .unwrap_or(200);
        (status, inner.delay)
    };
    tokio::time::sleep(delay).await;
    inner.lock().expect("receiver lock").inflight -= 1;
    if status == 0 {
        std::future::pending::<()>().await;
    }
    let mut answer = HeaderMap::new();
    if status == 302 {
        answer.insert(
            "location",
            "http://127.0.0.1:9/elsewhere".parse().expect("a header"),
        );
    }
    (
        StatusCode::from_u16(status).unwrap_or(StatusCode::OK),
        answer,
    )
}

/// Checks a Standard Webhooks signature with `ring` (not the gateway's code):
/// `v1,` + base64(HMAC-SHA256(key, "{id}.{timestamp}.{body}")).
pub fn signature_holds(secret: &str, delivery: &Received) -> bool {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    let Some(encoded) = secret.strip_prefix("whsec_") else {
        return false;
    };
    let Ok(key) = STANDARD.decode(encoded) else {
        return false;
    };
    let signed = format!(
        "{}.{}.",
        delivery.header("webhook-id"),
        delivery.header("webhook-timestamp")
    );
    let mut message = signed.into_bytes();
    message.extend_from_slice(&delivery.body);
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key);
    let expected = format!(
        "v1,{}",
        STANDARD.encode(ring::hmac::sign(&key, &message).as_ref())
    );
    delivery.header("webhook-signature") == expected
}
