//! The attempt loop under paused time, with the contract's real defaults.
//!
//! A scripted transport stands in for the network, so `tokio::time` can be paused
//! and a 140 s recipe request with all its back-offs runs in microseconds, while
//! every wait is still measured on the loop's own clock.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use futures_util::{StreamExt, stream};
use tokio::time::{Instant, sleep};

use super::{Completion, Gather, GaveUp, Progress, SharedUpstreams, Spec, UpstreamGuards};
use crate::config::{DEFAULT_BUSY_KEYWORDS, Secret};
use crate::engine::budget::{BudgetSettings, RetryBudget};
use crate::engine::failure::BusyKeywords;
use crate::engine::failure::FailureKind;
use crate::engine::metrics::Metrics;
use crate::engine::retry::{Deadline, RetryPolicy};
use crate::engine::trace::TraceContext;
use crate::engine::upstream::{BodyKind, Outgoing, Transport, Upstream, UpstreamResponse};

const S: Duration = Duration::from_secs(1);

/// What the fake upstream does for one attempt.
#[derive(Clone)]
enum Fake {
    /// Answers 503 after queueing this long.
    BusyAfter(Duration),
    /// Streams these pieces, each after its pause.
    Stream(Vec<(Duration, &'static str)>),
}

#[derive(Default)]
struct Scripted {
    answers: Mutex<VecDeque<Fake>>,
    sent: Mutex<Vec<Instant>>,
}

impl Transport for Scripted {
    fn send(&self, _request: Outgoing) -> BoxFuture<'_, Result<UpstreamResponse, FailureKind>> {
        self.sent.lock().expect("lock").push(Instant::now());
        let fake = self.answers.lock().expect("lock").pop_front();
        Box::pin(async move {
            let pieces = match fake {
                None => return Err(FailureKind::Connect("no script".into())),
                Some(Fake::BusyAfter(wait)) => {
                    sleep(wait).await;
                    return Ok(response(503, vec![]));
                }
                Some(Fake::Stream(pieces)) => pieces,
            };
            Ok(response(200, pieces))
        })
    }
}

fn response(status: u16, pieces: Vec<(Duration, &'static str)>) -> UpstreamResponse {
    let body = stream::iter(pieces).then(|(pause, text)| async move {
        sleep(pause).await;
        Ok(Bytes::from_static(text.as_bytes()))
    });
    // An answer that runs out of pieces stays open and silent, like a stalled
    // socket; an error body simply ends.
    let body = if status == 200 {
        body.chain(stream::pending()).boxed()
    } else {
        body.boxed()
    };
    UpstreamResponse {
        status,
        retry_after: None,
        kind: BodyKind::EventStream,
        body,
    }
}

const ANSWER: &str = "data: {\"choices\":[{\"delta\":{\"content\":\"好\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
const CONTENT: &str = "data: {\"choices\":[{\"delta\":{\"content\":\"{\"}}]}\n\n";

fn policy(deadline_min_remaining: Duration) -> RetryPolicy {
    RetryPolicy {
        max_attempts: 5,
        backoff_base: 2 * S,
        backoff_max: 10 * S,
        early_retry_window: 20 * S,
        min_remaining: deadline_min_remaining,
        retry_after_output: true,
        jitter: 0.0,
        max_continuations: 2,
        continue_min_remaining: 10 * S,
    }
}

/// Runs one request to its end; returns the progress and the attempts' send times
/// relative to the request's start.
async fn run(
    answers: Vec<Fake>,
    allowed: Duration,
    policy: RetryPolicy,
) -> (Vec<Progress>, Vec<Duration>) {
    let transport = Arc::new(Scripted::default());
    transport.answers.lock().expect("lock").extend(answers);
    let upstream = Upstream::with_transport("fake", transport.clone(), Secret::default());
    let shared = SharedUpstreams {
        upstreams: vec![Arc::new(upstream)],
        guards: vec![UpstreamGuards {
            bulkhead: None,
            recent: Default::default(),
            breaker: None,
            budget: Arc::new(std::sync::Mutex::new(RetryBudget::new(BudgetSettings {
                ratio: 0.2,
                min_per_s: 10,
                window: 10 * S,
            }))),
        }],
        timeouts: super::attempt::AttemptTimeouts {
            idle: 30 * S,
            first_output: None,
        },
        busy_keywords: BusyKeywords::parse(DEFAULT_BUSY_KEYWORDS),
        inflight: crate::engine::bulkhead::Bulkhead::global(1, Metrics::new()),
        queue_timeout: 2 * S,
        metrics: Metrics::new(),
    };
    let started = Instant::now();
    let spec = Spec {
        body: Bytes::from_static(b"{}"),
        policy,
        deadline: Deadline::after(started, allowed),
        output: None,
        gather: Gather::Whole(4 << 20),
        prefix_limit: Some(4 << 20),
        slot: None,
        task_bulkhead: None,
        task: String::new(),
        model: "m".into(),
        client: String::new(),
        trace: TraceContext::start(),
    };
    let progress: Vec<Progress> = Completion::new(Arc::new(shared), spec)
        .into_stream()
        .collect()
        .await;
    let sent = transport
        .sent
        .lock()
        .expect("lock")
        .iter()
        .map(|t| *t - started)
        .collect();
    (progress, sent)
}

fn waits(progress: &[Progress]) -> Vec<u64> {
    progress
        .iter()
        .filter_map(|p| match p {
            Progress::Retry { wait, .. } => Some(wait.as_secs()),
            _ => None,
        })
        .collect()
}

fn outcome(progress: &[Progress]) -> Result<u32, &'static str> {
    match progress.last() {
        Some(Progress::Finished(finished)) => Ok(finished.attempts),
        Some(Progress::Failed(error)) => Err(error.code()),
        _ => Err("no end"),
    }
}

fn secs(times: &[Duration]) -> Vec<u64> {
    times.iter().map(Duration::as_secs).collect()
}

#[tokio::test(start_paused = true)]
async fn a_busy_upstream_is_retried_after_2_4_8_and_10_seconds_then_given_up() {
    let busy = vec![Fake::BusyAfter(Duration::ZERO); 5];
    let (progress, sent) = run(busy, 120 * S, policy(30 * S)).await;
    assert_eq!(waits(&progress), [2, 4, 8, 10]);
    assert_eq!(secs(&sent), [0, 2, 6, 14, 24]);
    assert_eq!(outcome(&progress), Err("upstream_busy"));
}

#[tokio::test(start_paused = true)]
async fn a_recipe_stops_retrying_when_the_wait_would_leave_less_than_95_seconds() {
    // Each busy answer comes after 8 s in the upstream's queue. After attempt 3
    // (t = 30 s) an 8 s wait leaves 102 s; after attempt 4 (t = 46 s) a 10 s wait
    // would leave 84 s, too little to write a recipe, so it gives up at once.
    let busy = vec![Fake::BusyAfter(8 * S); 5];
    let started = Instant::now();
    let (progress, sent) = run(busy, 140 * S, policy(95 * S)).await;
    assert_eq!(secs(&sent), [0, 10, 22, 38]);
    assert_eq!(waits(&progress), [2, 4, 8]);
    assert_eq!(outcome(&progress), Err("upstream_busy"));
    assert_eq!(started.elapsed().as_secs(), 46);
}

#[tokio::test(start_paused = true)]
async fn thirty_silent_seconds_before_any_output_are_retried_like_busy() {
    // The 2026-10-12 incident: no word for 30 s, idle timeout, 108 s still left.
    let answers = vec![Fake::Stream(vec![]), Fake::Stream(vec![(S, ANSWER)])];
    let (progress, sent) = run(answers, 140 * S, policy(95 * S)).await;
    assert_eq!(secs(&sent), [0, 32]);
    assert!(matches!(
        &progress[1],
        Progress::Retry {
            reason: crate::engine::failure::RetryReason::NotStarted,
            ..
        }
    ));
    assert_eq!(outcome(&progress), Ok(2));
}

#[tokio::test(start_paused = true)]
async fn silence_after_output_past_the_early_window_is_not_retried() {
    let answers = vec![
        Fake::Stream(vec![(S, CONTENT)]),
        Fake::Stream(vec![(S, ANSWER)]),
    ];
    let (progress, sent) = run(answers, 140 * S, policy(95 * S)).await;
    assert_eq!(
        sent.len(),
        1,
        "content arrived, then 30 s of silence: past the 20 s window"
    );
    assert_eq!(outcome(&progress), Err("upstream_failed"));
}

#[tokio::test(start_paused = true)]
async fn a_stream_that_never_ends_fails_exactly_at_the_deadline() {
    let drip: Vec<(Duration, &'static str)> = (0..1000).map(|_| (S, CONTENT)).collect();
    let started = Instant::now();
    let (progress, _) = run(vec![Fake::Stream(drip)], 120 * S, policy(30 * S)).await;
    assert_eq!(outcome(&progress), Err("deadline_exceeded"));
    assert_eq!(started.elapsed(), 120 * S);
    assert!(matches!(
        progress.last(),
        Some(Progress::Failed(GaveUp::Failed { failure, .. }))
            if failure.kind == crate::engine::failure::FailureKind::Deadline
    ));
}
