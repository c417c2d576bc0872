//! The `# HELP` lines of the exposition, and the series shown from the start.

use metrics::{Key, KeyName, Label, Recorder, Unit};
use metrics_exporter_prometheus::PrometheusRecorder;

/// The `# HELP` lines of the exposition.
pub fn describe(recorder: &PrometheusRecorder) {
    let counters = [
        (
            "ladle_requests_total",
            "Answered requests by route and HTTP status.",
        ),
        (
            "ladle_job_stream_resumes_total",
            "Job event streams opened with a cursor, by the row of the cursor table it met (kept, run_start, final).",
        ),
        (
            "ladle_upstream_attempts_total",
            "Ended upstream attempts by outcome and upstream.",
        ),
        (
            "ladle_fallbacks_total",
            "Retries sent to another upstream than the attempt before.",
        ),
        (
            "ladle_continuations_total",
            "Continuations of a cut answer, by upstream and how they ended (ok, failed, rejected).",
        ),
        (
            "ladle_retries_throttled_total",
            "Retries the upstream's retry budget refused.",
        ),
        (
            "ladle_breaker_transitions_total",
            "Circuit breaker changes of state, by upstream and new state.",
        ),
        ("ladle_retries_total", "Retries by reason."),
        (
            "ladle_tokens_total",
            "Tokens the upstreams reported in usage, by upstream, model, kind, task and client key.",
        ),
        (
            "ladle_idempotency_total",
            "Requests with an Idempotency-Key by outcome: executed, replayed, joined, reused.",
        ),
        (
            "ladle_redis_errors_total",
            "Calls to the fleet's Redis that failed or timed out, by what they were for.",
        ),
        (
            "ladle_store_errors_total",
            "What the job store could not do: read (a record ended as job_unreadable), commit.",
        ),
        (
            "ladle_jobs_finished_total",
            "Jobs that finished, by task and status.",
        ),
        (
            "ladle_job_runs_total",
            "Job runs by task and how they ended (HTTP status class, canceled, interrupted).",
        ),
        (
            "ladle_webhook_deliveries_total",
            "Webhook attempts by what they led to: delivered, retry, failed.",
        ),
        (
            "ladle_limit_waits_total",
            "Waits for a bulkhead's slot, by scope (task, upstream).",
        ),
        (
            "ladle_limit_rejections_total",
            "Requests a limit turned away, by scope (client, task, upstream).",
        ),
        (
            "ladle_cache_total",
            "Answers of cached tasks by what the cache did: hit, miss, stale.",
        ),
    ];
    for (name, help) in counters {
        recorder.describe_counter(KeyName::from(name), None, help.into());
    }
    recorder.describe_histogram(
        KeyName::from("ladle_request_duration_seconds"),
        Some(Unit::Seconds),
        "Completion requests (chat, tasks, job submits) by route, from arrival to the end of the response body, streams included.".into(),
    );
    recorder.describe_histogram(
        KeyName::from("ladle_time_to_first_output_seconds"),
        Some(Unit::Seconds),
        "From arrival to the first output chunk of a completion.".into(),
    );
    recorder.describe_histogram(
        KeyName::from("ladle_upstream_phase_seconds"),
        Some(Unit::Seconds),
        "From an attempt's start to each phase: connect (a new connection only), head, \
         first_event, first_output, end."
            .into(),
    );
    recorder.describe_histogram(
        KeyName::from("ladle_queue_wait_seconds"),
        Some(Unit::Seconds),
        "A completion's wait for its in-flight slot (LADLE_MAX_INFLIGHT) and its task's.".into(),
    );
    let gauges = [
        (
            "ladle_job_queue_age_seconds",
            None,
            "Age of the oldest queued job, 0 with none queued (fleet-wide with Redis).",
        ),
        (
            "ladle_inflight_requests",
            None,
            "Completion requests (chat and tasks) queued, waiting or streaming.",
        ),
        (
            "ladle_inflight",
            None,
            "Slots in use of each bulkhead: a client key's, a task's or an upstream's max_inflight.",
        ),
        (
            "ladle_jobs",
            None,
            "Unfinished jobs by status (fleet-wide with Redis).",
        ),
        (
            "ladle_job_streams",
            None,
            "Job event streams open on this replica, a submit's own included (long-polls not).",
        ),
        (
            "ladle_job_waiters",
            None,
            "Job reads waiting (?wait_ms) for their job to finish (LADLE_MAX_WAITERS).",
        ),
        (
            "ladle_state_file_bytes",
            Some(Unit::Bytes),
            "The state file's size on disk with its write-ahead log (LADLE_STATE_DB).",
        ),
        (
            "ladle_state_free_bytes",
            Some(Unit::Bytes),
            "Free space of the state file's folder for ladle (a full disk refuses submits).",
        ),
        (
            "ladle_redis_up",
            None,
            "1 while the fleet's Redis answers, 0 while it does not.",
        ),
        (
            "ladle_redis_persistent",
            None,
            "1 when the fleet's Redis has its append-only file on (jobs survive its restart), else 0.",
        ),
    ];
    for (name, unit, help) in gauges {
        recorder.describe_gauge(KeyName::from(name), unit, help.into());
    }
}

/// Counters registered at start, with every value their one label can take.
const KNOWN_AT_START: &[(&str, &str, &[&str])] = &[
    (
        "ladle_idempotency_total",
        "outcome",
        &["executed", "replayed", "joined", "reused"],
    ),
    ("ladle_limit_waits_total", "scope", &["task", "upstream"]),
    (
        "ladle_limit_rejections_total",
        "scope",
        &["client", "task", "upstream"],
    ),
    (
        "ladle_webhook_deliveries_total",
        "outcome",
        &["delivered", "retry", "failed"],
    ),
    (
        "ladle_job_stream_resumes_total",
        "from",
        &["kept", "run_start", "final"],
    ),
];

/// Registers [`KNOWN_AT_START`]: series whose labels are all known now render at
/// 0 from the start, so a dashboard or an alert sees "none yet" rather than "no
/// such series".
pub fn register_known(recorder: &PrometheusRecorder) {
    for (name, label, values) in KNOWN_AT_START {
        for value in *values {
            let key = Key::from_parts(*name, vec![Label::new(*label, *value)]);
            recorder
                .register_counter(&key, &super::METADATA)
                .increment(0);
        }
    }
}
