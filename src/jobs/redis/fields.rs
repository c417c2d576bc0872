//! A job's hash: its fields as Redis holds them, and the `Job` they make. The
//! scalar fields are plain strings (so scripts compare and change them in place);
//! the stored JSON parts are the versioned `JobRequest` and `Delivery` of
//! `record`, and the result and error objects, written as given.

use std::collections::HashMap;

use serde_json::Value;

use crate::jobs::{Delivery, Job, JobRequest, JobStatus, StoreDown};
use crate::store_down::Cause;

/// The fields of `job`'s hash, as (name, value) pairs; absent parts are left out.
pub fn encode(job: &Job) -> Result<Vec<(&'static str, String)>, StoreDown> {
    let json = |what: &str, e: serde_json::Error| {
        StoreDown::new("write", Cause::Encode(format!("{what}: {e}")))
    };
    let mut fields = vec![
        ("client", job.client.clone()),
        ("status", job.status.name().to_owned()),
        ("runs", job.runs.to_string()),
        ("created_at", job.created_at.to_string()),
        ("updated_at", job.updated_at.to_string()),
        (
            "request",
            serde_json::to_string(&job.request).map_err(|e| json("a request", e))?,
        ),
    ];
    if let Some(at) = job.next_run_at {
        fields.push(("next_run_at", at.to_string()));
    }
    if let Some(result) = &job.result {
        fields.push(("result", result.to_string()));
    }
    if let Some(error) = &job.error {
        fields.push(("error", error.to_string()));
    }
    if let Some(delivery) = &job.delivery {
        let text = serde_json::to_string(delivery).map_err(|e| json("a delivery", e))?;
        fields.push(("delivery", text));
    }
    if let Some(run_id) = &job.run_id {
        fields.push(("run_id", run_id.clone()));
    }
    Ok(fields)
}

/// A hash that does not decode: why.
#[derive(Debug)]
pub struct Unreadable(pub String);

/// The job `id` whose hash is `flat` (`HGETALL`'s name, value, name, value…); a
/// hash that does not decode (nested past what serde_json reads back by a build
/// that did not bound it, written by a later build, or damaged) is an error,
/// never a guess.
pub fn decode(id: &str, flat: Vec<String>) -> Result<Job, Unreadable> {
    let mut fields: HashMap<String, String> = HashMap::new();
    let mut pairs = flat.into_iter();
    while let (Some(name), Some(value)) = (pairs.next(), pairs.next()) {
        fields.insert(name, value);
    }
    let bad = |field: &str, why: String| Unreadable(format!("job {id}: field `{field}`: {why}"));
    let text = |field: &str| fields.get(field).cloned();
    let required = |field: &str| text(field).ok_or_else(|| bad(field, "missing".into()));
    let number = |field: &str| -> Result<Option<u64>, Unreadable> {
        text(field)
            .map(|t| t.parse::<u64>().map_err(|e| bad(field, e.to_string())))
            .transpose()
    };
    let json = |field: &str| -> Result<Option<Value>, Unreadable> {
        text(field)
            .map(|t| serde_json::from_str(&t).map_err(|e| bad(field, e.to_string())))
            .transpose()
    };
    let status = required("status")?;
    let request = required("request")?;
    let delivery = text("delivery")
        .map(|t| serde_json::from_str::<Delivery>(&t).map_err(|e| bad("delivery", e.to_string())))
        .transpose()?;
    let runs = required("runs")?;
    Ok(Job {
        id: id.to_owned(),
        client: required("client")?,
        status: JobStatus::from_name(&status)
            .ok_or_else(|| bad("status", format!("unknown status `{status}`")))?,
        runs: runs.parse().map_err(|e| bad("runs", format!("{e}")))?,
        created_at: number("created_at")?.ok_or_else(|| bad("created_at", "missing".into()))?,
        updated_at: number("updated_at")?.ok_or_else(|| bad("updated_at", "missing".into()))?,
        next_run_at: number("next_run_at")?,
        request: serde_json::from_str::<JobRequest>(&request)
            .map_err(|e| bad("request", e.to_string()))?,
        result: json("result")?,
        error: json("error")?,
        delivery,
        run_id: text("run_id"),
        final_event: text("final_event"),
        key: None,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, json};

    use super::*;
    use crate::jobs::record::VERSION;

    #[test]
    fn a_job_comes_back_as_it_was_written() {
        let request = JobRequest {
            v: VERSION,
            task: "recipe".into(),
            variables: Map::from_iter([("dish".to_owned(), json!("红烧肉"))]),
            timeout_ms: Some(90_000),
            cache_control: None,
            response: None,
        };
        let mut job = Job::queued(request, "client-a", 1_700_000_000_000);
        job.status = JobStatus::Failed;
        job.runs = 2;
        job.error = Some(json!({"code": "upstream_busy", "retryable": true}));
        job.delivery = Some(Delivery::pending(1_700_000_000_500));
        job.run_id = Some("run-1".into());
        let flat: Vec<String> = encode(&job)
            .expect("encodes")
            .into_iter()
            .flat_map(|(name, value)| [name.to_owned(), value])
            .collect();
        assert_eq!(decode(&job.id, flat).expect("decodes"), job);
    }

    #[test]
    fn a_damaged_hash_is_an_error_naming_the_field() {
        let request = r#"{"v":1,"task":"t","variables":{}}"#;
        let flat = [
            ("client", ""),
            ("status", "lost"),
            ("runs", "0"),
            ("created_at", "1"),
            ("updated_at", "1"),
            ("request", request),
        ]
        .into_iter()
        .flat_map(|(name, value)| [name.to_owned(), value.to_owned()])
        .collect();
        let error = decode("job_x", flat).expect_err("refused").0;
        assert!(error.contains("`status`"), "{error}");
    }
}
