//! `GET /v1/models` (contract 3.4): every model the configuration and the
//! prompts name, as the prompts are now; one by id; behind client keys.

use reqwest::Method;
use serde_json::{Value, json};

use crate::clients::{KEY_A, call_as, keyed_gateway, keys_file};
use crate::support::*;

fn ids(list: &Value) -> Vec<&str> {
    list["data"]
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect()
}

const PROMPT_WITH_MODEL: &str = "description = \"a task on its own model\"\noutput = \"text\"\n\
     model = \"qwen/qwen3-max\"\n\n[messages]\nuser = \"hi\"\n";

#[tokio::test]
async fn the_list_names_each_configured_and_prompted_model_once_sorted_and_follows_prompt_edits() {
    let app = Gateway::options().admin().start().await;
    let before = json_of(app.get("/v1/models").await).await;
    assert_eq!(before["object"], "list");
    assert_eq!(ids(&before), ["test-model"], "{before}");
    assert_eq!(
        before["data"][0],
        json!({"id": "test-model", "object": "model", "created": 0, "owned_by": "ladle"})
    );
    let saved = app.put_prompt("own_model", PROMPT_WITH_MODEL, None).await;
    assert_eq!(saved.status(), 201);
    let after = json_of(app.get("/v1/models").await).await;
    assert_eq!(ids(&after), ["qwen/qwen3-max", "test-model"]);
    let one = app.get("/v1/models/qwen/qwen3-max").await;
    assert_eq!(one.status(), 200);
    assert_eq!(json_of(one).await["id"], "qwen/qwen3-max");
    let encoded = json_of(app.get("/v1/models/qwen%2Fqwen3-max").await).await;
    assert_eq!(encoded["id"], "qwen/qwen3-max", "percent-decoded");
    let (status, body) = error_of(app.get("/v1/models/gpt-nope").await).await;
    assert_eq!((status, body["code"].as_str()), (404, Some("not_found")));
}

#[tokio::test]
async fn with_client_keys_the_list_needs_a_key_and_shows_every_model_whatever_its_tasks() {
    let path = keys_file(&[("narrow", KEY_A, "tasks = [\"fridge\"]")]);
    let app = keyed_gateway(&path).await;
    let (status, body) = error_of(app.get("/v1/models").await).await;
    assert_eq!((status, body["code"].as_str()), (401, Some("unauthorized")));
    let listed = call_as(&app, KEY_A, Method::GET, "/v1/models").await;
    assert_eq!(listed.status(), 200);
    assert_eq!(ids(&json_of(listed).await), ["test-model"]);
}
