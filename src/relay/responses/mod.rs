//! `POST /v1/responses` answered (contract 12): the response object, or its
//! events. A stream sends nothing before its first output item, as a chat
//! stream sends nothing before its first output (3.1): a failure before then is
//! the plain error; after it, `response.failed`.

mod events;
pub mod object;

pub use events::{Event, Events};
pub use object::{Echo, Made};

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::response::Response;
use bytes::{Bytes, BytesMut};
use futures_util::{Stream, StreamExt};
use tokio::time::{Instant, Sleep, sleep_until};

use super::batched::{Batched, Frames};
use crate::engine::completion::Progress;
use crate::error::ApiError;
use crate::ops::facts::LateWord;

/// Answers with the events of `made`'s response, once its first output item
/// began; the plain error if the request fails before.
pub async fn streaming(
    progress: impl Stream<Item = Progress> + Send + Unpin + 'static,
    made: Made,
) -> Response {
    let mut progress = progress;
    let mut events = Events::new(made);
    let mut held = events.start();
    let mut attempts = 0;
    loop {
        let Some(step) = progress.next().await else {
            let ended = ApiError::UpstreamFailed("the completion ended without an answer".into());
            return ended.into_completion_response(attempts);
        };
        match step {
            Progress::Failed(gave_up) if !events.output_began() => {
                return ApiError::from(gave_up).into_completion_response(attempts);
            }
            Progress::Attempt(n) => attempts = n,
            _ => {}
        }
        let finished = matches!(step, Progress::Finished(_) | Progress::Failed(_));
        held.extend(events.on(&step));
        if events.output_began() || finished {
            break;
        }
    }
    let failed = LateWord::default();
    let mut first = BytesMut::new();
    for event in held {
        first.extend_from_slice(&event.frame());
    }
    let rendered = Rendered {
        events,
        failed: failed.clone(),
    };
    let mut response = pinged(Batched::new(progress, first, rendered));
    response.extensions_mut().insert(failed);
    response
}

/// The frames of a committed Responses stream's later steps: written as the
/// OpenAI stream's are, as few writes as the steps allow (`Batched`).
struct Rendered {
    events: Events,
    /// Told the code of the failure that ends the stream, for the request's log.
    failed: LateWord,
}

impl Frames<Progress> for Rendered {
    fn put(&mut self, out: &mut BytesMut, step: Progress) {
        if let Progress::Failed(gave_up) = &step {
            self.failed.set(gave_up.code());
        }
        for event in self.events.on(&step) {
            out.extend_from_slice(&event.frame());
        }
    }
}

/// An event stream of `frames`, with a `: ping` comment once 15 s have passed
/// with nothing sent; the frames already there go out in one write (a chunk's
/// delta often comes with an item's and a part's events).
pub fn sse_with_pings(frames: impl Stream<Item = Bytes> + Send + 'static) -> Response {
    let joined = frames.ready_chunks(32).map(|frames| match frames.len() {
        1 => frames.into_iter().next().unwrap_or_default(),
        _ => Bytes::from(frames.concat()),
    });
    pinged(joined)
}

/// An event stream of `frames` as they come, with the pings.
fn pinged(frames: impl Stream<Item = Bytes> + Send + 'static) -> Response {
    let pinged = Pinged {
        frames: Box::pin(frames),
        last: Instant::now(),
        timer: Box::pin(sleep_until(Instant::now() + PING_EVERY)),
    };
    super::sse_response(axum::body::Body::from_stream(
        pinged.map(Ok::<_, Infallible>),
    ))
}

/// How long a stream may be silent before a `: ping`.
const PING_EVERY: Duration = Duration::from_secs(15);

/// Frames, with pings in the silences. A frame only notes the time: the timer
/// is moved when it fires, not per frame.
struct Pinged<S> {
    frames: Pin<Box<S>>,
    last: Instant,
    timer: Pin<Box<Sleep>>,
}

impl<S: Stream<Item = Bytes>> Stream for Pinged<S> {
    type Item = Bytes;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        if let Poll::Ready(frame) = self.frames.as_mut().poll_next(cx) {
            self.last = Instant::now();
            return Poll::Ready(frame);
        }
        loop {
            ready!(self.timer.as_mut().poll(cx));
            let due = self.last + PING_EVERY;
            if Instant::now() >= due {
                self.last = Instant::now();
                let next = self.last + PING_EVERY;
                self.timer.as_mut().reset(next);
                return Poll::Ready(Some(Bytes::from_static(b": ping\n\n")));
            }
            self.timer.as_mut().reset(due);
        }
    }
}
