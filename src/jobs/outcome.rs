//! What a run's end means for its job (contract 7.1's table): the one judge of
//! it, pure, with the time as an argument.

use std::time::Duration;

use serde_json::Value;

/// How a run ended, as the store writes it.
#[derive(Debug, Clone, PartialEq)]
pub enum RunEnd {
    /// It answered `200`: the body is the job's result.
    Succeeded(Value),
    /// It failed retryably with runs left: the next run is due at `until`.
    Waiting {
        /// The run's error object (not shown while waiting).
        error: Value,
        /// When the next run is due (Unix ms).
        until: u64,
    },
    /// It failed for good: the error object is the job's.
    Failed(Value),
    /// Its caller canceled the job meanwhile.
    Canceled,
}

/// A run's error, as the judge needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunError {
    /// The `error` object of the run's error body.
    pub object: Value,
    /// Its HTTP status.
    pub status: u16,
    /// Whether asking again later can help.
    pub retryable: bool,
    /// The `Retry-After` its answer carried, if any: a floor for the next run.
    pub retry_after: Option<Duration>,
}

/// What run number `runs` (1-based) ending as `ended` makes of its job, with at
/// most `max_runs` runs and `retry` between runs, at `now` (Unix ms).
pub fn judge(
    ended: Result<Value, RunError>,
    runs: u32,
    max_runs: u32,
    retry: Duration,
    now: u64,
) -> RunEnd {
    match ended {
        Ok(body) => RunEnd::Succeeded(body),
        Err(error) if error.retryable && runs < max_runs => {
            let wait = retry.max(error.retry_after.unwrap_or_default());
            RunEnd::Waiting {
                error: error.object,
                until: now + wait.as_millis() as u64,
            }
        }
        Err(error) => RunEnd::Failed(error.object),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn failed(retryable: bool, retry_after: Option<u64>) -> Result<Value, RunError> {
        Err(RunError {
            object: json!({"code": "upstream_busy"}),
            status: 503,
            retryable,
            retry_after: retry_after.map(Duration::from_secs),
        })
    }

    #[test]
    fn every_row_of_the_contract_table() {
        let retry = Duration::from_secs(300);
        assert_eq!(
            judge(Ok(json!({"task": "t"})), 1, 3, retry, 0),
            RunEnd::Succeeded(json!({"task": "t"}))
        );
        assert_eq!(
            judge(failed(true, None), 1, 3, retry, 1_000),
            RunEnd::Waiting {
                error: json!({"code": "upstream_busy"}),
                until: 301_000
            }
        );
        assert_eq!(
            judge(failed(true, None), 3, 3, retry, 0),
            RunEnd::Failed(json!({"code": "upstream_busy"})),
            "no runs left"
        );
        assert_eq!(
            judge(failed(false, None), 1, 3, retry, 0),
            RunEnd::Failed(json!({"code": "upstream_busy"})),
            "not retryable"
        );
    }

    #[test]
    fn the_errors_retry_after_is_a_floor() {
        let retry = Duration::from_secs(10);
        let ended = judge(failed(true, Some(60)), 1, 3, retry, 0);
        assert!(
            matches!(ended, RunEnd::Waiting { until: 60_000, .. }),
            "{ended:?}"
        );
        let ended = judge(failed(true, Some(2)), 1, 3, retry, 0);
        assert!(
            matches!(ended, RunEnd::Waiting { until: 10_000, .. }),
            "{ended:?}"
        );
    }
}
