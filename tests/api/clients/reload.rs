//! The keys file edited while the gateway runs: a key added is let in, and one
//! removed refused, within 2 s; a broken edit keeps the last good keys and
//! makes `/readyz` 503 saying why (never quoting a digest) until the file is
//! fixed; a key that keeps its name keeps its bucket across an edit.

use std::time::Duration;

use super::*;
use crate::support::mock_upstream::*;

/// The contract's bound on an edit going live.
const LIVE_WITHIN: Duration = Duration::from_secs(2);

/// Waits until a chat under `key` is answered `status`.
async fn chat_answers(gateway: &Gateway, key: &str, status: u16) {
    let what = format!("a chat under {key} to answer {status}");
    eventually(LIVE_WITHIN, what, async || {
        chat_as(gateway, key).await.status() == status
    })
    .await;
}

#[tokio::test]
async fn a_key_added_to_the_file_is_let_in_and_one_removed_is_refused_within_2_s() {
    let path = keys_file(&[("alpha", KEY_A, "")]);
    let gateway = keyed_gateway(&path).await;
    gateway.upstream().cycle([sse_answer(&["好"])]);
    assert_eq!(chat_as(&gateway, KEY_B).await.status(), 401);
    rewrite(
        &path,
        &keys_toml(&[("alpha", KEY_A, ""), ("bravo", KEY_B, "")]),
    );
    chat_answers(&gateway, KEY_B, 200).await;
    assert_eq!(chat_as(&gateway, KEY_A).await.status(), 200);
    rewrite(&path, &keys_toml(&[("bravo", KEY_B, "")]));
    chat_answers(&gateway, KEY_A, 401).await;
    assert_eq!(chat_as(&gateway, KEY_B).await.status(), 200);
}

/// `/readyz`'s body once it reports a problem with the keys file other than
/// `before` (it must be a 503 then), and the problem.
async fn broken_unlike(gateway: &Gateway, before: Option<&str>) -> (String, String) {
    let what = format!("/readyz to report a keys problem other than {before:?}");
    eventually(LIVE_WITHIN, what, async || {
        let response = gateway.get("/readyz").await;
        let status = response.status().as_u16();
        let body = response.text().await.expect("body");
        let ready: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        let why = ready["client_keys"]["broken"].as_str()?.to_owned();
        assert_eq!(status, 503, "{body}");
        (Some(why.as_str()) != before).then_some((body, why))
    })
    .await
}

#[tokio::test]
async fn a_broken_edit_keeps_the_last_good_keys_and_readyz_says_why_without_a_digest() {
    let path = keys_file(&[("alpha", KEY_A, "")]);
    let gateway = keyed_gateway(&path).await;
    gateway.upstream().cycle([sse_answer(&["好"])]);
    let (a, b) = (sha256_hex(KEY_A), sha256_hex(KEY_B));
    let good = keys_toml(&[("alpha", KEY_A, ""), ("bravo", KEY_B, "")]);
    let broken = [
        // A TOML error on the line of a digest.
        good.replace(&format!("\"{b}\""), &format!("\"{b}")),
        // A digest in upper case.
        good.replace(&b, &b.to_uppercase()),
        // One digest twice.
        good.replace(&b, &a),
    ];
    let mut before: Option<String> = None;
    for text in &broken {
        rewrite(&path, text);
        let (body, why) = broken_unlike(&gateway, before.as_deref()).await;
        for digest in [&a, &b] {
            assert!(
                !body.to_lowercase().contains(digest.as_str()),
                "a digest quoted: {body}"
            );
        }
        // The last good keys serve: A as before, B not yet.
        assert_eq!(chat_as(&gateway, KEY_A).await.status(), 200, "{why}");
        assert_eq!(chat_as(&gateway, KEY_B).await.status(), 401, "{why}");
        before = Some(why);
    }
    rewrite(&path, &good);
    let body = gateway.eventually_readyz(200).await;
    assert!(!body.contains("client_keys"), "{body}");
    assert_eq!(chat_as(&gateway, KEY_B).await.status(), 200);
}

#[tokio::test]
async fn a_key_that_keeps_its_name_across_an_edit_keeps_its_bucket() {
    // A token every 1000 s: the edit's wait gives none back.
    let slow = "rate_per_s = 0.001\nburst = 1";
    let path = keys_file(&[("alpha", KEY_A, slow)]);
    let gateway = keyed_gateway(&path).await;
    gateway.upstream().cycle([sse_answer(&["好"])]);
    assert_eq!(chat_as(&gateway, KEY_A).await.status(), 200);
    assert_eq!(chat_as(&gateway, KEY_A).await.status(), 429);
    rewrite(
        &path,
        &keys_toml(&[("alpha", KEY_A, slow), ("bravo", KEY_B, "")]),
    );
    chat_answers(&gateway, KEY_B, 200).await;
    rate_limited_about(chat_as(&gateway, KEY_A).await, 1000).await;
}
