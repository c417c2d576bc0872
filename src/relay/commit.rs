//! The commit point of an OpenAI stream (contract 3.1, 6.4), one state machine for
//! a running completion and for a repeat waiting on another request's run.
//!
//! Until the first output nothing is sent, not even the status line: steps are
//! held, a new attempt voids them, and a failure is still a plain HTTP error. With
//! `LADLE_STREAM_KEEPALIVE_MS`, a silence that long since the request arrived sends
//! the `200` head and `: keep-alive` comments until the first output; only a
//! failure's form changes then (one `error` event, no `[DONE]`). From the first
//! output on, `Batched` writes the rest: upstream chunks relayed byte for byte,
//! never re-serialized.

use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::response::Response;
use bytes::{Bytes, BytesMut};
use futures_util::{Stream, StreamExt, stream};
use tokio::time::{Instant, Sleep, sleep_until, timeout_at};

pub use super::step::Step;

use super::batched::{Batched, Chunks};
use super::wire::{COMMENT, put_event};
use crate::error::ApiError;
use crate::ops::facts::LateWord;

/// Where the held stream stands after a step.
enum Held {
    /// Still before the commit point.
    Waiting,
    /// The first output is held: commit.
    Commit,
    /// Over before any output: the held bytes are the whole answer.
    End,
    /// Failed before any output.
    Failed(ApiError),
}

/// The transitions before the commit point, for both drivers (before the head and
/// after a keep-alive head).
fn hold(held: &mut BytesMut, attempts: &mut u32, step: Option<Step>) -> Held {
    match step {
        Some(Step::Hold(raw)) => put_event(held, &raw),
        Some(Step::Output(raw)) => {
            put_event(held, &raw);
            return Held::Commit;
        }
        Some(Step::Attempt(n)) => {
            *attempts = n;
            held.clear();
        }
        Some(Step::Void) => held.clear(),
        Some(Step::Continued) => {}
        Some(Step::End(last)) => {
            held.extend_from_slice(&last);
            return Held::End;
        }
        Some(Step::Failed(error)) => return Held::Failed(error),
        None => {
            return Held::Failed(ApiError::UpstreamFailed(
                "the completion ended without an answer".into(),
            ));
        }
    }
    Held::Waiting
}

/// Answers with an SSE stream once the first output (or, with `keep_alive` =
/// `(every, arrived)`, a silence of `every` since `arrived`) is there; a failure
/// before then is the plain error.
pub async fn respond<S>(
    mut steps: S,
    request_id: String,
    keep_alive: Option<(Duration, Instant)>,
) -> Response
where
    S: Stream<Item = Step> + Send + Unpin + 'static,
{
    let mut held = BytesMut::new();
    let mut attempts = 0;
    loop {
        let step = match keep_alive {
            None => steps.next().await,
            Some((every, arrived)) => match timeout_at(arrived + every, steps.next()).await {
                Ok(step) => step,
                Err(_silence) => {
                    let failed = LateWord::default();
                    let body = Commented::new(steps, held, request_id, failed.clone(), every);
                    return sse(body.boxed(), failed);
                }
            },
        };
        match hold(&mut held, &mut attempts, step) {
            Held::Waiting => {}
            Held::Commit => {
                let failed = LateWord::default();
                let write = Chunks {
                    request_id,
                    failed: failed.clone(),
                };
                let body = Batched::new(steps, held, write);
                return sse(body.boxed(), failed);
            }
            Held::End => {
                let body = stream::once(std::future::ready(held.freeze()));
                return sse(body.boxed(), LateWord::default());
            }
            Held::Failed(error) => return error.into_completion_response(attempts),
        }
    }
}

/// An event-stream answer; `failed` learns the code of an error event that ends
/// it, for the request's log line.
fn sse(body: stream::BoxStream<'static, Bytes>, failed: LateWord) -> Response {
    let body = axum::body::Body::from_stream(body.map(Ok::<_, std::convert::Infallible>));
    let mut response = super::sse_response(body);
    response.extensions_mut().insert(failed);
    response
}

/// A stream whose head went out before its first output: comments until then,
/// then the committed stream.
struct Commented<S> {
    /// The steps, until the first output hands them to `committed`.
    steps: Option<S>,
    held: BytesMut,
    attempts: u32,
    request_id: String,
    failed: LateWord,
    every: Duration,
    timer: Pin<Box<Sleep>>,
    /// The first comment goes out at once: the silence has already lasted.
    first: bool,
    committed: Option<Batched<S, Chunks>>,
    over: bool,
}

impl<S> Commented<S> {
    fn new(
        steps: S,
        held: BytesMut,
        request_id: String,
        failed: LateWord,
        every: Duration,
    ) -> Self {
        Commented {
            steps: Some(steps),
            held,
            attempts: 0,
            request_id,
            failed,
            every,
            timer: Box::pin(sleep_until(Instant::now() + every)),
            first: true,
            committed: None,
            over: false,
        }
    }
}

impl<S: Stream<Item = Step> + Unpin> Stream for Commented<S> {
    type Item = Bytes;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let this = self.get_mut();
        if std::mem::take(&mut this.first) {
            return Poll::Ready(Some(Bytes::from_static(COMMENT)));
        }
        if let Some(committed) = this.committed.as_mut() {
            return committed.poll_next_unpin(cx);
        }
        if this.over {
            return Poll::Ready(None);
        }
        while let Some(steps) = this.steps.as_mut() {
            let Poll::Ready(step) = steps.poll_next_unpin(cx) else {
                break;
            };
            match hold(&mut this.held, &mut this.attempts, step) {
                Held::Waiting => {}
                Held::Commit => {
                    let Some(steps) = this.steps.take() else {
                        break;
                    };
                    let held = this.held.split();
                    let write = Chunks {
                        request_id: this.request_id.clone(),
                        failed: this.failed.clone(),
                    };
                    let committed = this.committed.insert(Batched::new(steps, held, write));
                    return committed.poll_next_unpin(cx);
                }
                Held::End => {
                    this.over = true;
                    return Poll::Ready(Some(this.held.split().freeze()));
                }
                Held::Failed(error) => {
                    this.over = true;
                    this.failed.set(error.code());
                    let mut out = BytesMut::new();
                    put_event(
                        &mut out,
                        error.body(&this.request_id).to_string().as_bytes(),
                    );
                    return Poll::Ready(Some(out.freeze()));
                }
            }
        }
        ready!(this.timer.as_mut().poll(cx));
        let next = Instant::now() + this.every;
        this.timer.as_mut().reset(next);
        Poll::Ready(Some(Bytes::from_static(COMMENT)))
    }
}
