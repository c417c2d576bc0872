//! What belongs to a key: its background jobs (another key reading or
//! cancelling one hears `404 job_not_found`, and the job goes on) and its
//! idempotency keys (the same `Idempotency-Key` from two keys is two records).

use reqwest::Method;
use serde_json::Value;

use super::*;
use crate::jobs::job_id;
use crate::support::mock_upstream::*;
use crate::support::scripts::paced_answer;

#[tokio::test]
async fn another_keys_read_or_cancel_of_a_job_is_404_and_the_job_goes_on() {
    let path = keys_file(&[("alpha", KEY_A, ""), ("bravo", KEY_B, "")]);
    let gateway = keyed_gateway(&path).await;
    // Slow enough that the job is still running when B tries to cancel it.
    let upstream = gateway.upstream();
    upstream.push([paced_answer(&[r#"{"ideas": ["番茄炒蛋"]}"#], 200)]);
    let submitted = submit_as(&gateway, KEY_A, "番茄").await;
    let id = job_id(submitted).await;
    let job_path = format!("/v1/jobs/{id}");
    for method in [Method::GET, Method::DELETE] {
        let response = call_as(&gateway, KEY_B, method.clone(), &job_path).await;
        let error = refused(response, 404, "job_not_found").await;
        assert_eq!(error["retryable"], false, "{method}: {error}");
    }
    // Its event stream and long-poll are A's alone too (contract 11.1).
    for events in [
        format!("{job_path}/events"),
        format!("{job_path}/events?after=0.1"),
    ] {
        let response = call_as(&gateway, KEY_B, Method::GET, &events).await;
        refused(response, 404, "job_not_found").await;
    }
    let own = call_as(&gateway, KEY_A, Method::GET, &format!("{job_path}/events")).await;
    assert_eq!(own.status(), 200);
    drop(own);
    let waited = call_as(
        &gateway,
        KEY_A,
        Method::GET,
        &format!("{job_path}?wait_ms=3000"),
    )
    .await;
    assert_eq!(waited.status(), 200);
    let job = json_of(waited).await;
    assert_eq!(job["status"], "succeeded", "B's cancel did nothing: {job}");
    assert_eq!(upstream.requests().len(), 1);
    // Once over, still not B's.
    let late = call_as(&gateway, KEY_B, Method::GET, &job_path).await;
    refused(late, 404, "job_not_found").await;
}

/// A whole-answer chat under client key `key` and `Idempotency-Key: order-1`:
/// whether it was replayed, and what it said.
async fn keyed_chat(gateway: &Gateway, key: &str) -> (bool, String) {
    let response = gateway
        .chat_request(false)
        .bearer_auth(key)
        .header("idempotency-key", "order-1")
        .send()
        .await
        .expect("the gateway answers");
    assert_eq!(response.status(), 200);
    let replayed = replayed(&response);
    let body: Value = json_of(response).await;
    let said = body["choices"][0]["message"]["content"]
        .as_str()
        .expect("an answer")
        .to_owned();
    (replayed, said)
}

#[tokio::test]
async fn the_same_idempotency_key_from_two_keys_is_two_records_each_replayed_to_its_own() {
    let path = keys_file(&[("alpha", KEY_A, ""), ("bravo", KEY_B, "")]);
    let gateway = keyed_gateway(&path).await;
    let upstream = gateway.upstream();
    upstream.push([sse_answer(&["甲"]), sse_answer(&["乙"])]);
    upstream.fallback(status(500, r#"{"error": {"message": "no third call"}}"#));
    assert_eq!(keyed_chat(&gateway, KEY_A).await, (false, "甲".to_owned()));
    assert_eq!(
        keyed_chat(&gateway, KEY_B).await,
        (false, "乙".to_owned()),
        "B's run is its own, not A's replayed"
    );
    assert_eq!(upstream.requests().len(), 2);
    assert_eq!(keyed_chat(&gateway, KEY_A).await, (true, "甲".to_owned()));
    assert_eq!(keyed_chat(&gateway, KEY_B).await, (true, "乙".to_owned()));
    assert_eq!(upstream.requests().len(), 2, "the repeats were replayed");
}
