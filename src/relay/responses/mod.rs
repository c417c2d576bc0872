//! `POST /v1/responses` answered (contract 12): the response object, or its
//! events. A stream sends nothing before its first output item, as a chat
//! stream sends nothing before its first output (3.1): a failure before then is
//! the plain error; after it, `response.failed`.

mod events;
pub mod object;

pub use events::{Event, Events};
pub use object::{Echo, Made};

use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::{Stream, StreamExt, stream};

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
    let told = failed.clone();
    let rest = progress.flat_map(move |step| {
        if let Progress::Failed(gave_up) = &step {
            told.set(gave_up.code());
        }
        stream::iter(events.on(&step))
    });
    let all = stream::iter(held).chain(rest).map(|event| {
        let data = event.data.to_string();
        Ok::<_, Infallible>(SseEvent::default().event(event.kind).data(data))
    });
    let keep_alive = KeepAlive::new()
        .interval(Duration::from_secs(15))
        .text(" ping");
    let mut response = Sse::new(all).keep_alive(keep_alive).into_response();
    response.extensions_mut().insert(failed);
    response
}
