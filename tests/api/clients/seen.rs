//! What the real binary shows of its callers: the request line's `client`
//! (the key's name, `""` for a 401), `ladle_requests_total` by `client`, the
//! warning of a broken edit, and never a key or its digest in any line.

use std::time::Duration;

use super::*;
use crate::support::mock_upstream::*;
use crate::support::process::LadleProcess;

/// A key no file declares; it must not be logged either.
const UNKNOWN_KEY: &str = "lk_never-declared-9999";

/// The real binary with client keys from `path`, the file looked at every 50 ms.
async fn keyed_binary(upstream: &MockUpstream, path: &Path) -> LadleProcess {
    let path = path.to_str().expect("a UTF-8 path");
    let env = [
        ("LADLE_CLIENT_KEYS_FILE", path),
        ("LADLE_PROMPT_RELOAD_MS", "50"),
    ];
    LadleProcess::start(&upstream.url, &env).await
}

/// A chat under `authorization` (if any) and `X-Request-Id: request_id`; its
/// status.
async fn chat_with(gateway: &LadleProcess, request_id: &str, authorization: Option<&str>) -> u16 {
    let mut request = gateway
        .chat_request(false)
        .header("x-request-id", request_id);
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    let response = request.send().await.expect("the gateway answers");
    response.status().as_u16()
}

#[tokio::test]
async fn request_lines_name_the_client_and_no_line_ever_shows_a_key_or_its_digest() {
    let upstream = MockUpstream::start().await;
    upstream.cycle([sse_answer(&["好"])]);
    let path = keys_file(&[("miniapp-prod", KEY_A, ""), ("backoffice", KEY_B, "")]);
    let mut gateway = keyed_binary(&upstream, &path).await;
    let bearer = |key: &str| format!("Bearer {key}");
    assert_eq!(chat_with(&gateway, "as-a", Some(&bearer(KEY_A))).await, 200);
    assert_eq!(chat_with(&gateway, "as-b", Some(&bearer(KEY_B))).await, 200);
    assert_eq!(chat_with(&gateway, "no-key", None).await, 401);
    let unknown = bearer(UNKNOWN_KEY);
    assert_eq!(chat_with(&gateway, "unknown", Some(&unknown)).await, 401);
    // A broken edit is a warning, which names no digest either.
    let text = keys_toml(&[("miniapp-prod", KEY_A, ""), ("backoffice", KEY_B, "")]);
    let digest = sha256_hex(KEY_B);
    rewrite(
        &path,
        &text.replace(&format!("\"{digest}\""), &format!("\"{digest}")),
    );
    let broken = "client keys file is broken; the last good keys stay";
    eventually(
        Duration::from_secs(2),
        "the broken edit's warning",
        async || gateway.lines().iter().any(|l| l.contains(broken)),
    )
    .await;
    assert_eq!(
        chat_with(&gateway, "after-edit", Some(&bearer(KEY_A))).await,
        200
    );
    gateway.terminate();
    gateway.exited(Duration::from_secs(5)).await;
    for (request_id, client) in [
        ("as-a", "miniapp-prod"),
        ("as-b", "backoffice"),
        ("no-key", ""),
        ("unknown", ""),
        ("after-edit", "miniapp-prod"),
    ] {
        let answered = gateway.lines_of(request_id, "request answered");
        assert_eq!(answered.len(), 1, "{request_id}: {answered:?}");
        assert_eq!(
            answered[0]["client"], client,
            "{request_id}: {}",
            answered[0]
        );
    }
    let lines = gateway.all_lines();
    let warning = lines
        .iter()
        .find(|l| l.contains(broken))
        .expect("the warning");
    assert!(warning.contains("\"WARN\""), "{warning}");
    let secrets = [KEY_A, KEY_B, UNKNOWN_KEY]
        .into_iter()
        .flat_map(|key| [key.to_owned(), sha256_hex(key)]);
    for secret in secrets {
        let shown: Vec<&String> = lines
            .iter()
            .filter(|l| l.to_lowercase().contains(&secret))
            .collect();
        assert!(shown.is_empty(), "{secret} shown: {shown:#?}");
    }
}

#[tokio::test]
async fn requests_total_counts_by_client_and_a_401_as_the_empty_client() {
    let path = keys_file(&[("miniapp-prod", KEY_A, ""), ("backoffice", KEY_B, "")]);
    let gateway = keyed_gateway(&path).await;
    gateway.upstream().cycle([sse_answer(&["好"])]);
    for key in [KEY_A, KEY_A, KEY_B] {
        assert_eq!(chat_as(&gateway, key).await.status(), 200);
    }
    assert_eq!(chat_as(&gateway, UNKNOWN_KEY).await.status(), 401);
    assert_eq!(gateway.chat(false).await.status(), 401);
    let series = |code: u16, client: &str| {
        format!(
            "ladle_requests_total{{route=\"/v1/chat/completions\",code=\"{code}\",client=\"{client}\"}}"
        )
    };
    let text = gateway.metrics().await;
    for (code, client, count) in [
        (200, "miniapp-prod", 2.0),
        (200, "backoffice", 1.0),
        (401, "", 2.0),
    ] {
        let name = series(code, client);
        assert_eq!(metric_value(&text, &name), Some(count), "{name}\n{text}");
    }
    assert!(
        !text.contains("ladle_requests_total{route=\"/v1/chat/completions\",code=\"200\"}"),
        "no series without its client: {text}"
    );
}

#[tokio::test]
async fn without_client_keys_requests_total_has_no_client_label() {
    let gateway = Gateway::start().await;
    gateway.upstream().cycle([sse_answer(&["好"])]);
    assert_eq!(gateway.chat(false).await.status(), 200);
    let text = gateway.metrics().await;
    let series = "ladle_requests_total{route=\"/v1/chat/completions\",code=\"200\"}";
    assert_eq!(metric_value(&text, series), Some(1.0), "{text}");
    assert!(!text.contains("client=\""), "{text}");
}
