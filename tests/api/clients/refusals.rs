//! Who may call: without a known client key every `/v1/*` route is `401` (a
//! bad body too: the key comes first), with `WWW-Authenticate`, and nothing goes
//! upstream; the operators' routes need no client key; a key limited to some
//! tasks is `403` on the others (a task that does not exist too) but may chat.

use reqwest::Method;
use serde_json::json;

use super::*;
use crate::support::mock_upstream::*;

#[tokio::test]
async fn every_v1_route_answers_401_without_a_known_key_and_sends_nothing_upstream() {
    let path = keys_file(&[("miniapp", KEY_A, "")]);
    let gateway = keyed_gateway(&path).await;
    gateway.upstream().cycle([sse_answer(&["好"])]);
    let job = "/v1/jobs/job_0000000000000000000000";
    let fridge = json!({"ingredients": ["鸡蛋"]});
    // How the key is (not) given.
    let ways: [(&str, Option<String>); 6] = [
        ("no header", None),
        ("an unknown key", Some(format!("Bearer {KEY_B}"))),
        ("the key alone", Some(KEY_A.to_owned())),
        (
            "the key under another scheme",
            Some(format!("Token {KEY_A}")),
        ),
        ("an empty bearer", Some("Bearer ".to_owned())),
        ("the key with a byte more", Some(format!("Bearer {KEY_A}x"))),
    ];
    for (way, authorization) in ways {
        let requests = [
            gateway.chat_request(false),
            gateway.post_request("/v1/tasks/fridge", &fridge),
            gateway.post_request("/v1/tasks/fridge?async=true", &fridge),
            // A body that fails validation: the key is looked at first.
            gateway
                .client
                .post(gateway.url("/v1/chat/completions"))
                .header("content-type", "application/json")
                .body("{not json"),
            gateway.client.request(Method::GET, gateway.url(job)),
            gateway.client.request(Method::DELETE, gateway.url(job)),
        ];
        for (n, mut request) in requests.into_iter().enumerate() {
            if let Some(value) = &authorization {
                request = request.header("authorization", value);
            }
            let response = request.send().await.expect("the gateway answers");
            assert_eq!(
                response
                    .headers()
                    .get("www-authenticate")
                    .map(|v| v.as_bytes()),
                Some(&b"Bearer"[..]),
                "{way}, request {n}"
            );
            let error = refused(response, 401, "unauthorized").await;
            assert_eq!(error["retryable"], false, "{way}, request {n}: {error}");
        }
    }
    assert_eq!(
        gateway.upstream().requests().len(),
        0,
        "nothing went upstream"
    );
    // The file's key is let in.
    assert_eq!(chat_as(&gateway, KEY_A).await.status(), 200);
    assert_eq!(gateway.upstream().requests().len(), 1);
}

#[tokio::test]
async fn health_readiness_metrics_and_admin_need_no_client_key() {
    let path = keys_file(&[("miniapp", KEY_A, "")]);
    let gateway = Gateway::options()
        .adjust(with_keys(&path))
        .admin()
        .start()
        .await;
    for route in ["/healthz", "/readyz", "/metrics"] {
        let response = gateway.get(route).await;
        assert_eq!(response.status(), 200, "{route}");
    }
    let prompts = gateway.admin(Method::GET, "/admin/prompts").send().await;
    assert_eq!(
        prompts.expect("answers").status(),
        200,
        "the admin token is enough"
    );
    assert_eq!(
        gateway.chat(false).await.status(),
        401,
        "but /v1 needs a key"
    );
}

#[tokio::test]
async fn a_key_limited_to_fridge_is_403_on_other_tasks_and_unknown_ones_but_may_chat() {
    let path = keys_file(&[("fridge-only", KEY_A, "tasks = [\"fridge\"]")]);
    let gateway = keyed_gateway(&path).await;
    gateway
        .upstream()
        .cycle([sse_answer(&[r#"{"ideas": ["番茄炒蛋"]}"#])]);
    let dish = json!({"dish": "红烧肉"});
    for task in [
        "/v1/tasks/recipe",
        "/v1/tasks/recipe?async=true",
        "/v1/tasks/no-such-task",
        "/v1/tasks/no-such-task?async=true",
    ] {
        let error = refused(
            post_as(&gateway, KEY_A, task, &dish).await,
            403,
            "forbidden",
        )
        .await;
        assert_eq!(error["retryable"], false, "{task}: {error}");
    }
    assert_eq!(
        gateway.upstream().requests().len(),
        0,
        "nothing went upstream"
    );
    let fridge = json!({"ingredients": ["鸡蛋"]});
    let allowed = post_as(&gateway, KEY_A, "/v1/tasks/fridge", &fridge).await;
    assert_eq!(allowed.status(), 200);
    assert_eq!(
        chat_as(&gateway, KEY_A).await.status(),
        200,
        "tasks do not limit chat"
    );
    assert_eq!(gateway.upstream().requests().len(), 2);
}

#[tokio::test]
async fn a_forbidden_task_is_403_even_with_variables_that_would_be_422() {
    let path = keys_file(&[("fridge-only", KEY_A, "tasks = [\"fridge\"]")]);
    let gateway = keyed_gateway(&path).await;
    let empty = json!({});
    refused(
        post_as(&gateway, KEY_A, "/v1/tasks/recipe", &empty).await,
        403,
        "forbidden",
    )
    .await;
    // The same variables on a task the key may run are checked, and refused.
    let allowed = post_as(&gateway, KEY_A, "/v1/tasks/fridge", &empty).await;
    refused(allowed, 422, "invalid_variables").await;
    assert_eq!(gateway.upstream().requests().len(), 0);
}

#[tokio::test]
async fn without_a_tasks_list_a_key_runs_every_task_and_an_unknown_one_is_404() {
    let path = keys_file(&[("everything", KEY_A, "")]);
    let gateway = keyed_gateway(&path).await;
    gateway
        .upstream()
        .cycle([sse_answer(&[r#"{"ideas": ["番茄炒蛋"]}"#])]);
    let fridge = json!({"ingredients": ["鸡蛋"]});
    let ran = post_as(&gateway, KEY_A, "/v1/tasks/fridge", &fridge).await;
    assert_eq!(ran.status(), 200);
    let unknown = post_as(&gateway, KEY_A, "/v1/tasks/no-such-task", &fridge).await;
    refused(unknown, 404, "not_found").await;
}
