//! A request with an `Idempotency-Key` (contract 6.6): what the key's record says
//! it is, counted and noted for the log line.

use axum::response::Response;
use serde_json::Value;
use tokio::time::Instant;

use crate::error::ApiError;
use crate::idempotency::{self, Lookup, RunSlot};
use crate::ops::facts::CompletionNote;
use crate::relay::replay::{self, Waiting};
use crate::relay::{Reply, ResponseShape};
use crate::state::AppState;

/// A keyed request's completion: run here, or answered from another request's run.
pub enum KeyLookup {
    /// The answer, from a kept result or a run this request waited for.
    Answered(Response),
    /// This request runs; its outcome goes to the slot.
    Runs(Box<dyn RunSlot>),
}

/// Looks `client`'s `key` up for the request at `path` named by `identity`, and
/// counts what it led to; `Err` for another request under the key.
pub async fn look_up(
    app: &AppState,
    (client, key): (&str, &str),
    path: &str,
    identity: &Value,
    reply: &Reply,
    deadline: Instant,
    note: &mut CompletionNote,
) -> Result<KeyLookup, ApiError> {
    // Chat's `stream` only picks the answer's shape; a task's variable of that name
    // is part of the request.
    let chat = matches!(
        reply.shape,
        ResponseShape::ChatJson | ResponseShape::ChatStream
    );
    let fingerprint = idempotency::fingerprint(path, identity, chat);
    let found = app
        .idempotency
        .begin(
            &idempotency::scoped(client, key),
            fingerprint,
            Instant::now(),
            deadline,
        )
        .await;
    let outcome = match &found {
        Lookup::Kept(_) => "replayed",
        Lookup::Reused => "reused",
        Lookup::Wait(_) => "joined",
        Lookup::Run(_) => "executed",
    };
    app.metrics.idempotency(outcome);
    note.idempotency_key = Some(key.to_owned());
    note.idempotency = Some(outcome);
    match found {
        Lookup::Kept(kept) => Ok(KeyLookup::Answered(replay::replay(&kept, reply))),
        Lookup::Reused => Err(ApiError::IdempotencyKeyReused),
        Lookup::Wait(outcome) => Ok(KeyLookup::Answered(
            replay::wait(Waiting {
                outcome,
                deadline,
                reply: reply.clone(),
            })
            .await,
        )),
        Lookup::Run(slot) => Ok(KeyLookup::Runs(slot)),
    }
}
