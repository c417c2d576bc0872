//! What the fault drill (`drill.rs`) counts with: one client's chat request read
//! to its end and how it ended, and this process's open descriptors and resident
//! memory from `/proc/self`.

use serde_json::Value;

use super::answers::sse_events;
use super::http::chat_body;

/// How one client's request ended.
#[derive(Debug)]
pub enum Ending {
    /// A whole answer: a `chat.completion`, or a stream ending with `[DONE]`.
    Answer,
    /// A plain error response.
    Error(u16, String),
    /// A committed stream that ended with an `error` event.
    StreamError(String),
}

/// One client's chat request, streaming or not, read to its end.
pub async fn call(client: &reqwest::Client, base: &str, stream: bool) -> Ending {
    let response = client
        .post(format!("{base}/v1/chat/completions"))
        .json(&chat_body(stream))
        .send()
        .await
        .expect("the gateway answers");
    let status = response.status().as_u16();
    let text = response.text().await.expect("a whole body");
    if status != 200 {
        let error: Value = serde_json::from_str(&text).expect("a JSON error");
        let code = error["error"]["code"].as_str().expect("a code").to_owned();
        return Ending::Error(status, code);
    }
    if !stream {
        let answer: Value = serde_json::from_str(&text).expect("a chat.completion");
        let content = answer["choices"][0]["message"]["content"].as_str();
        assert!(content.is_some_and(|c| !c.is_empty()), "answer {answer}");
        return Ending::Answer;
    }
    let events = sse_events(&text);
    let last = &events.last().expect("at least one event").1;
    if last == "[DONE]" {
        return Ending::Answer;
    }
    let error: Value = serde_json::from_str(last).expect("an error event");
    Ending::StreamError(error["error"]["code"].as_str().expect("a code").to_owned())
}

/// File descriptors this process has open.
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .count()
}

/// This process's resident memory, in KiB.
pub fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a VmRSS line")
}
