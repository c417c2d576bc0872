//! An upstream's final rejection on chat keeps the status an OpenAI client's
//! error class keys on (contract 3): 400, 404, 413 and 422 stay, every other
//! final 4xx is 502; tasks keep 502 whatever the upstream said.

use serde_json::json;

use crate::support::mock_upstream::*;
use crate::support::*;

fn rejection(code: &str, message: &str) -> String {
    json!({"error": {"message": message, "type": "invalid_request_error", "code": code}})
        .to_string()
}

#[tokio::test]
async fn a_chat_keeps_the_upstreams_400_404_413_and_422_plain_and_streamed() {
    let app = Gateway::start().await;
    for upstream_status in [400u16, 404, 413, 422] {
        for stream in [false, true] {
            app.upstream().push([status(
                upstream_status,
                &rejection("context_length_exceeded", "too long"),
            )]);
            let (answered, body) = error_of(app.chat(stream).await).await;
            assert_eq!(answered, upstream_status, "stream {stream}: {body}");
            assert_eq!(body["code"], "upstream_rejected");
            assert_eq!(body["retryable"], false);
            assert_eq!(body["upstream"]["status"], upstream_status);
        }
    }
}

#[tokio::test]
async fn every_other_final_4xx_on_chat_is_502() {
    let app = Gateway::start().await;
    for upstream_status in [401u16, 403, 409] {
        app.upstream()
            .push([status(upstream_status, &rejection("x", "no"))]);
        let (answered, body) = error_of(app.chat(false).await).await;
        assert_eq!(answered, 502, "{upstream_status}: {body}");
        assert_eq!(body["code"], "upstream_rejected");
        assert_eq!(body["upstream"]["status"], upstream_status);
    }
}

#[tokio::test]
async fn a_task_keeps_502_for_the_upstreams_400() {
    let app = Gateway::start().await;
    app.upstream()
        .push([status(400, &rejection("content_filter", "filtered"))]);
    let (answered, body) =
        error_of(app.task("fridge", &json!({"ingredients": ["蛋"]})).await).await;
    assert_eq!(answered, 502, "{body}");
    assert_eq!(body["code"], "upstream_rejected");
    assert_eq!(body["upstream"]["status"], 400);
}

#[tokio::test]
async fn a_keyed_chat_run_keeps_the_status_too() {
    let app = Gateway::start().await;
    app.upstream().push([status(
        404,
        &rejection("model_not_found", "The model `x` does not exist"),
    )]);
    let (answered, body) = error_of(app.chat_keyed("rejected-1").await).await;
    assert_eq!(answered, 404, "{body}");
    assert_eq!(body["code"], "upstream_rejected");
}
