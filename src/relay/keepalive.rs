//! `LADLE_STREAM_KEEPALIVE_MS` (contract 6.4): a streaming chat request that has
//! sent nothing for that long gets its `200` head and `: keep-alive` comments while
//! ladle still waits for the first output (a reasoning model queueing, a back-off),
//! so that a load balancer in front does not cut an idle connection. Retries and
//! fallbacks go on as before; only a failure's form changes once the head is out:
//! one `error` event with the HTTP error's body, and no `[DONE]`.

use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::{Stream, StreamExt};
use tokio::time::{Instant, Sleep, sleep_until};

use super::batched::{Batched, DONE, put_event};
use crate::completion::Progress;
use crate::error::StreamError;

/// The comment sent after each silence.
const COMMENT: &[u8] = b": keep-alive\n\n";

/// A stream whose head went out before its first output: comments until then,
/// then the committed stream.
pub struct KeepAlive<P> {
    /// The completion, until the first output hands it to `committed`.
    progress: Option<P>,
    /// Events held back until the first output (the last attempt's only).
    held: BytesMut,
    request_id: String,
    failed: StreamError,
    every: Duration,
    timer: Pin<Box<Sleep>>,
    /// The first comment goes out at once: the silence has already lasted.
    first: bool,
    committed: Option<Batched<P>>,
    over: bool,
}

impl<P> KeepAlive<P> {
    /// The stream after `every` of silence, with the events `held` so far.
    pub fn new(
        progress: P,
        held: BytesMut,
        request_id: String,
        failed: StreamError,
        every: Duration,
    ) -> Self {
        KeepAlive {
            progress: Some(progress),
            held,
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

impl<P: Stream<Item = Progress> + Unpin> Stream for KeepAlive<P> {
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
        while let Some(progress) = this.progress.as_mut() {
            let Poll::Ready(step) = progress.poll_next_unpin(cx) else {
                break;
            };
            match step {
                Some(Progress::Chunk(received)) => {
                    put_event(&mut this.held, &received.raw);
                    if received.chunk.is_output()
                        && let Some(progress) = this.progress.take()
                    {
                        let held = this.held.split();
                        let (id, failed) = (this.request_id.clone(), this.failed.clone());
                        let committed = this
                            .committed
                            .insert(Batched::new(progress, held, id, failed));
                        return committed.poll_next_unpin(cx);
                    }
                }
                Some(Progress::Attempt(_) | Progress::Retry { .. }) => this.held.clear(),
                Some(Progress::Finished(_)) => {
                    this.over = true;
                    this.held.extend_from_slice(DONE);
                    return Poll::Ready(Some(this.held.split().freeze()));
                }
                Some(Progress::Failed(error)) => {
                    this.over = true;
                    this.failed.set(error.code());
                    let mut out = BytesMut::new();
                    put_event(
                        &mut out,
                        error.body(&this.request_id).to_string().as_bytes(),
                    );
                    return Poll::Ready(Some(out.freeze()));
                }
                None => {
                    this.over = true;
                    return Poll::Ready(None);
                }
            }
        }
        ready!(this.timer.as_mut().poll(cx));
        let next = Instant::now() + this.every;
        this.timer.as_mut().reset(next);
        Poll::Ready(Some(Bytes::from_static(COMMENT)))
    }
}
