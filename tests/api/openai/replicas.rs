//! A background response across replicas (contract 12 on 11.1–11.2): created
//! on A, its events resumed on B after the sequence number seen on A, and its
//! object read on B, all through the job's Redis stream; and a plain stored
//! response read, gone on from and deleted on the other replica.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::mock_upstream::*;
use crate::support::redis::RedisServer;
use crate::support::scripts::paced_answer;
use crate::support::*;

/// The events of a response stream, as `(type, data)`.
async fn events_of(response: reqwest::Response) -> Vec<(String, Value)> {
    let text = response.text().await.expect("events");
    task_events(&text)
}

#[tokio::test]
async fn a_background_response_made_on_one_replica_is_resumed_and_read_on_the_other() {
    let redis = RedisServer::start().await;
    let upstream = MockUpstream::start().await;
    upstream.push([paced_answer(&["番茄", "炒蛋", "，", "先炒蛋"], 40)]);
    let a = Gateway::replica(&redis, &upstream).start().await;
    let b = Gateway::replica(&redis, &upstream).start().await;
    let created = a
        .post(
            "/v1/responses",
            &json!({"input": "番茄炒蛋怎么做？", "background": true}),
        )
        .await;
    let created = json_of(created).await;
    assert_eq!(created["status"], "queued", "{created}");
    let id = created["id"].as_str().expect("an id").to_owned();
    let whole = events_of(a.get(&format!("/v1/responses/{id}?stream=true")).await).await;
    let last = whole.last().expect("an end");
    assert_eq!(last.0, "response.completed", "{whole:?}");
    let cut = 5;
    let resumed = events_of(
        b.get(&format!(
            "/v1/responses/{id}?stream=true&starting_after={cut}"
        ))
        .await,
    )
    .await;
    assert_eq!(
        resumed,
        whole[cut + 1..].to_vec(),
        "B renders what A rendered"
    );
    let object = eventually(Duration::from_secs(2), "the object on B", async || {
        let object = json_of(b.get(&format!("/v1/responses/{id}")).await).await;
        (object["status"] == "completed").then_some(object)
    })
    .await;
    assert_eq!(
        object["output"][0]["content"][0]["text"],
        "番茄炒蛋，先炒蛋"
    );
}

#[tokio::test]
async fn a_plain_response_stored_on_one_replica_is_gone_on_from_and_deleted_on_the_other() {
    let redis = RedisServer::start().await;
    let upstream = MockUpstream::start().await;
    upstream.push([sse_answer(&["先炒蛋"]), sse_answer(&["再炒番茄"])]);
    let a = Gateway::replica(&redis, &upstream).start().await;
    let b = Gateway::replica(&redis, &upstream).start().await;
    let first = json_of(
        a.post("/v1/responses", &json!({"input": "番茄炒蛋怎么做？"}))
            .await,
    )
    .await;
    let id = first["id"].as_str().expect("an id").to_owned();
    assert_eq!(
        json_of(b.get(&format!("/v1/responses/{id}")).await).await,
        first
    );
    let next = json!({"input": "然后呢？", "previous_response_id": id});
    let second = json_of(b.post("/v1/responses", &next).await).await;
    assert_eq!(second["status"], "completed", "{second}");
    assert_eq!(
        upstream.requests()[1].body["messages"],
        json!([{"role": "user", "content": "番茄炒蛋怎么做？"},
               {"role": "assistant", "content": "先炒蛋"},
               {"role": "user", "content": "然后呢？"}])
    );
    let deleted = json_of(b.delete(&format!("/v1/responses/{id}")).await).await;
    assert_eq!(deleted["deleted"], true, "{deleted}");
    let (status, _) = error_of(a.get(&format!("/v1/responses/{id}")).await).await;
    assert_eq!(status, 404, "deleted for the whole fleet");
}
