//! A mock upstream on a raw TCP socket, so a test controls every byte and every
//! pause: it can answer any status, stream SSE with delays, stall, split bytes inside
//! a UTF-8 character, reset the connection, and it records each request and when
//! the gateway closed its socket.
//!
//! Each connection plays the next script in the queue, then the next one of the
//! cycle (round robin), then the fallback script.
//! Responses are close-delimited (`Connection: close`, no length), so a script's
//! end is the body's end.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use super::eventually::within;

mod build;

pub use build::*;

/// One thing the mock does on the socket.
#[derive(Debug, Clone)]
pub enum Step {
    /// Write these bytes.
    Send(Vec<u8>),
    /// Wait.
    Pause(Duration),
    /// Hold the socket silent until the gateway closes it.
    Stall,
    /// Write these bytes every `gap`, forever, until the gateway closes the socket.
    Drip(Vec<u8>, Duration),
    /// Write these bytes again and again, as fast as the socket takes them, until
    /// the gateway closes it.
    Flood(Vec<u8>),
    /// Reset the connection (RST).
    Reset,
    /// The response is whole: keep the socket and read the next request on it.
    KeepAlive,
}

/// What the mock does for one request.
#[derive(Debug, Clone, Default)]
pub struct Script(pub Vec<Step>);

/// One request the mock received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The request body as JSON.
    pub body: Value,
    /// The raw request head.
    pub head: String,
    /// When the request arrived.
    pub arrived: Instant,
    /// When the gateway closed the socket, if the mock saw it.
    pub closed: Option<Instant>,
    /// Which connection it came on (numbered from 0 in accept order).
    pub connection: usize,
}

/// Makes the script for a request from its body, or leaves it to the queue.
pub type Responder = Arc<dyn Fn(&Value) -> Option<Script> + Send + Sync>;

#[derive(Default)]
struct State {
    responder: Option<Responder>,
    scripts: VecDeque<Script>,
    cycle: Vec<Script>,
    turn: usize,
    fallback: Option<Script>,
    requests: Vec<Recorded>,
}

/// The mock server.
#[derive(Clone)]
pub struct MockUpstream {
    /// Base URL for `LADLE_UPSTREAM_URL`.
    pub url: String,
    state: Arc<Mutex<State>>,
    open: Arc<AtomicUsize>,
}

impl MockUpstream {
    /// Starts the mock on an ephemeral loopback port.
    pub async fn start() -> MockUpstream {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind mock upstream");
        let url = format!("http://{}/v1", listener.local_addr().expect("mock address"));
        let state = Arc::new(Mutex::new(State::default()));
        let open = Arc::new(AtomicUsize::new(0));
        let (shared, counter) = (state.clone(), open.clone());
        tokio::spawn(async move {
            let mut accepted = 0;
            while let Ok((socket, _)) = listener.accept().await {
                let guard = OpenSocket::new(counter.clone());
                let state = shared.clone();
                tokio::spawn(async move {
                    serve(socket, accepted, state).await;
                    drop(guard);
                });
                accepted += 1;
            }
        });
        MockUpstream { url, state, open }
    }

    /// Scripts played in turn, round robin, once the queue is empty.
    pub fn cycle(&self, scripts: impl IntoIterator<Item = Script>) {
        self.lock().cycle = scripts.into_iter().collect();
    }

    /// Sockets accepted and not yet closed.
    pub fn open_sockets(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    /// Queues scripts, one per coming request.
    pub fn push(&self, scripts: impl IntoIterator<Item = Script>) {
        self.lock().scripts.extend(scripts);
    }

    /// Answers the requests `responder` has a script for, once the queue is
    /// empty (it sees each body); the rest go to the cycle or the fallback.
    pub fn respond_with(&self, responder: Responder) {
        self.lock().responder = Some(responder);
    }

    /// The script for requests beyond the queue.
    pub fn fallback(&self, script: Script) {
        self.lock().fallback = Some(script);
    }

    /// Requests received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.lock().requests.clone()
    }

    /// Which connection each request so far came on.
    pub fn connections(&self) -> Vec<usize> {
        self.lock().requests.iter().map(|r| r.connection).collect()
    }

    /// Waits (up to two seconds) until request `index` has seen its socket closed.
    pub async fn closed_at(&self, index: usize) -> Option<Instant> {
        within(Duration::from_secs(2), async || {
            self.lock().requests.get(index).and_then(|r| r.closed)
        })
        .await
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("mock state lock")
    }
}

async fn serve(mut socket: TcpStream, connection: usize, state: Arc<Mutex<State>>) {
    loop {
        let Some((head, body)) = read_request(&mut socket).await else {
            return;
        };
        let (index, queued) = {
            let mut state = state.lock().expect("mock state lock");
            let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let queued = state.scripts.pop_front();
            let queued = queued.or_else(|| state.responder.as_ref().and_then(|f| f(&body)));
            state.requests.push(Recorded {
                body,
                head,
                arrived: Instant::now(),
                closed: None,
                connection,
            });
            (state.requests.len() - 1, queued)
        };
        let script = queued
            .or_else(|| next_script(&state))
            .unwrap_or_else(|| status(500, "no script left"));
        match play(&mut socket, script).await {
            End::KeepAlive => continue,
            End::Done => return,
            End::ClosedByPeer => {
                state.lock().expect("mock state lock").requests[index].closed =
                    Some(Instant::now());
                return;
            }
        }
    }
}

fn next_script(state: &Mutex<State>) -> Option<Script> {
    let mut state = state.lock().expect("mock state lock");
    let state = &mut *state;
    state
        .scripts
        .pop_front()
        .or_else(|| {
            let turn = state.turn;
            state.turn += 1;
            state.cycle.get(turn % state.cycle.len().max(1)).cloned()
        })
        .or_else(|| state.fallback.clone())
}

/// Counts a socket as open until dropped.
struct OpenSocket(Arc<AtomicUsize>);

impl OpenSocket {
    fn new(counter: Arc<AtomicUsize>) -> Self {
        counter.fetch_add(1, Ordering::SeqCst);
        OpenSocket(counter)
    }
}

impl Drop for OpenSocket {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// How a script ended.
enum End {
    /// The gateway closed the socket first.
    ClosedByPeer,
    /// The script ran out; the mock closes the socket.
    Done,
    /// The socket stays open for the next request.
    KeepAlive,
}

/// Plays a script.
async fn play(socket: &mut TcpStream, script: Script) -> End {
    for step in script.0 {
        match step {
            Step::Send(bytes) => {
                if socket.write_all(&bytes).await.is_err() {
                    return End::ClosedByPeer;
                }
                let _ = socket.flush().await;
            }
            Step::Pause(duration) => tokio::time::sleep(duration).await,
            Step::Stall => {
                let mut buf = [0u8; 1024];
                while let Ok(n) = socket.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                }
                return End::ClosedByPeer;
            }
            Step::Drip(bytes, gap) => loop {
                if socket.write_all(&bytes).await.is_err() {
                    return End::ClosedByPeer;
                }
                tokio::time::sleep(gap).await;
            },
            Step::Flood(bytes) => loop {
                if socket.write_all(&bytes).await.is_err() {
                    return End::ClosedByPeer;
                }
            },
            Step::Reset => {
                let _ = socket.set_zero_linger();
                return End::Done;
            }
            Step::KeepAlive => return End::KeepAlive,
        }
    }
    End::Done
}

/// Reads one request: its head as text and its body.
pub async fn read_request(
    socket: &mut (impl tokio::io::AsyncRead + Unpin),
) -> Option<(String, Vec<u8>)> {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        let n = socket.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&data[..head_end]).into_owned();
    let length = content_length(&head);
    while data.len() < head_end + length {
        let n = socket.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
    }
    Some((head, data[head_end..head_end + length].to_vec()))
}

/// The `Content-Length` of an HTTP head, 0 when absent.
pub fn content_length(head: &str) -> usize {
    head.lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().to_owned())
        })
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(0)
}
