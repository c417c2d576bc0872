//! Stored responses (contract 12): one made without `background` is kept
//! (unless `store: false`), read back, gone on from with
//! `previous_response_id`, and deleted, with the official SDKs as the judge; a
//! background one deleted while it runs; and a create repeated under its
//! `Idempotency-Key`.

use serde_json::{Value, json};

use super::sdk::{oracle_of, run_oracle};
use crate::support::mock_upstream::*;
use crate::support::process::LadleProcess;
use crate::support::*;

#[tokio::test]
async fn a_plain_response_is_stored_read_gone_on_from_and_deleted() {
    let app = Gateway::start().await;
    app.upstream().push([
        sse_answer(&["先炒蛋", "再炒番茄"]),
        sse_answer(&["炒蛋，加番茄"]),
        sse_answer(&["不存"]),
    ]);
    let parsed = oracle_of("openai_responses.py", &app, "stored").await;
    assert_eq!(
        (
            parsed["first_status"].clone(),
            parsed["retrieved_status"].clone()
        ),
        (json!("completed"), json!("completed")),
        "{parsed}"
    );
    assert_eq!(
        parsed["retrieved_equal"], true,
        "the object as it was answered"
    );
    assert_eq!(parsed["second_text"], "炒蛋，加番茄", "{parsed}");
    assert_eq!(parsed["second_previous"], parsed["first_id"]);
    assert_eq!(
        parsed["stream_of_a_plain_one"], 400,
        "only a background response has events"
    );
    assert_eq!(
        parsed["unstored_retrieve"], 404,
        "store: false keeps nothing"
    );
    assert_eq!(
        parsed["deleted"],
        Value::Null,
        "the SDK's delete returns nothing"
    );
    assert_eq!(
        (
            parsed["retrieve_after_delete"].clone(),
            parsed["delete_again"].clone()
        ),
        (json!(404), json!(404))
    );
    assert_eq!(parsed["second_still_there"], 200);
    let sent = app.upstream().requests();
    assert_eq!(
        sent[1].body["messages"],
        super::second_turn_messages(),
        "the stored turn, its instructions excepted"
    );
}

#[tokio::test]
async fn delete_answers_the_deleted_object_and_a_running_background_response_stops() {
    let app = Gateway::start().await;
    app.upstream()
        .fallback(sse(vec![data(&role()), Step::Stall]));
    let created = json_of(
        app.post(
            "/v1/responses",
            &json!({"input": "番茄炒蛋怎么做？", "background": true}),
        )
        .await,
    )
    .await;
    let id = created["id"].as_str().expect("an id").to_owned();
    requests_arrive(app.upstream(), 1).await;
    let deleted = json_of(app.delete(&format!("/v1/responses/{id}")).await).await;
    assert_eq!(
        deleted,
        json!({"id": id, "object": "response.deleted", "deleted": true})
    );
    for path in [
        format!("/v1/responses/{id}"),
        format!("/v1/jobs/job_{}", &id["resp_".len()..]),
    ] {
        let (status, _) = error_of(app.get(&path).await).await;
        assert_eq!(status, 404, "{path}");
    }
    assert!(
        app.upstream().closed_at(0).await.is_some(),
        "the deleted response's run was stopped"
    );
    let parsed = oracle_of("openai_responses.py", &app, "deleted").await;
    assert_eq!(parsed["created"], "queued", "{parsed}");
    assert_eq!(
        (
            parsed["retrieve_after_delete"].clone(),
            parsed["cancel_after_delete"].clone()
        ),
        (json!(404), json!(404))
    );
}

#[tokio::test]
async fn a_create_repeated_under_its_key_is_the_same_response_in_the_shape_asked() {
    let app = Gateway::start().await;
    app.upstream().push([sse_answer(&["番茄", "炒蛋"])]);
    let body = json!({"input": "番茄炒蛋怎么做？"});
    let first = app.post_keyed("/v1/responses", "k-1", &body, false).await;
    assert!(first.headers().get("idempotent-replayed").is_none());
    let first = json_of(first).await;
    let again = app.post_keyed("/v1/responses", "k-1", &body, false).await;
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(json_of(again).await, first, "the kept object, unchanged");
    let streamed = json!({"input": "番茄炒蛋怎么做？", "stream": true});
    let replayed = app
        .post_keyed("/v1/responses", "k-1", &streamed, true)
        .await;
    assert_eq!(replayed.headers()["idempotent-replayed"], "true");
    let events = task_events(&replayed.text().await.expect("events"));
    let kinds: Vec<&str> = events.iter().map(|(kind, _)| kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed"
        ]
    );
    let numbers: Vec<u64> = events
        .iter()
        .filter_map(|(_, data)| data["sequence_number"].as_u64())
        .collect();
    assert_eq!(numbers, (0..9).collect::<Vec<u64>>());
    assert_eq!(events[4].1["delta"], "番茄炒蛋");
    assert_eq!(events[8].1["response"], first, "the same response, whole");
    let other = json!({"input": "别的"});
    let (status, error) =
        error_of(app.post_keyed("/v1/responses", "k-1", &other, false).await).await;
    assert_eq!(
        (status, error["code"].clone()),
        (422, json!("idempotency_key_reused"))
    );
    assert_eq!(app.upstream().requests().len(), 1, "one run for them all");
}

#[tokio::test]
async fn a_background_create_repeated_under_its_key_is_the_same_job() {
    let app = Gateway::start().await;
    app.upstream()
        .fallback(sse(vec![data(&role()), Step::Stall]));
    let body = json!({"input": "番茄炒蛋怎么做？", "background": true});
    let first = json_of(app.post_keyed("/v1/responses", "k-2", &body, false).await).await;
    let again = app.post_keyed("/v1/responses", "k-2", &body, false).await;
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(json_of(again).await["id"], first["id"]);
    requests_arrive(app.upstream(), 1).await;
    let other = json!({"input": "别的", "background": true});
    let (status, error) =
        error_of(app.post_keyed("/v1/responses", "k-2", &other, false).await).await;
    assert_eq!(
        (status, error["code"].clone()),
        (422, json!("idempotency_key_reused"))
    );
}

#[tokio::test]
async fn node_the_sdk_deletes_a_stored_response() {
    let app = Gateway::start().await;
    app.upstream().push([sse_answer(&["番茄", "炒蛋"])]);
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    assert!(
        root.join("target/sdk-node/node_modules/openai").exists(),
        "the Node SDK oracle needs its SDK: run `bash .ci/sdk-node` (Node.js and npm; \
         .ci/run does it), or skip these tests with `--skip openai::responses`"
    );
    let parsed = run_oracle("node", "openai_responses.mjs", &app, "deleted").await;
    assert_eq!(parsed["retrieved"], "番茄炒蛋", "{parsed}");
    assert_eq!(parsed["after"], 404);
}

#[tokio::test]
async fn the_request_line_names_the_response_id() {
    let mock = MockUpstream::start().await;
    mock.fallback(sse_answer(&["番茄炒蛋"]));
    let mut ladle = LadleProcess::start(&mock.url, &[]).await;
    let mut ids = Vec::new();
    for (request_id, background) in [("resp-plain", false), ("resp-background", true)] {
        let body = json!({"input": "番茄炒蛋怎么做？", "background": background});
        let sent = ladle
            .post_request("/v1/responses", &body)
            .header("x-request-id", request_id);
        let object: Value = sent.send().await.expect("sent").json().await.expect("JSON");
        ids.push((request_id, object["id"].clone()));
    }
    ladle.terminate();
    ladle.exited(std::time::Duration::from_secs(5)).await;
    for (request_id, id) in ids {
        let lines = ladle.lines_of(request_id, "request answered");
        assert_eq!(lines.len(), 1, "{request_id}");
        assert_eq!(lines[0]["response_id"], id, "{request_id}");
    }
}
