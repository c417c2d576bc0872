//! A prompts folder that cannot be listed drops nothing: moved away for a while
//! during a deploy, or unlistable because the process ran out of descriptors
//! (`EMFILE`), the prompts read before stay live, queued jobs run with them,
//! `/readyz` answers `503` naming the folder meanwhile, and one `WARN` line says
//! so (not one a reload). On the real binary; the descriptor limit is lowered
//! with util-linux's `prlimit`.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::jobs::{ideas, job_after, job_id, submit};
use crate::support::mock_upstream::*;
use crate::support::process::LadleProcess;
use crate::support::scripts::paced_answer;
use crate::support::*;

/// `ladle serve` on the prompts folder `dir`, reloading it every 20 ms.
async fn serve_on(dir: &std::path::Path, upstream: &MockUpstream) -> LadleProcess {
    let dir = dir.to_str().expect("a UTF-8 path");
    LadleProcess::start(
        &upstream.url,
        &[
            ("LADLE_PROMPTS_DIR", dir),
            ("LADLE_PROMPT_RELOAD_MS", "20"),
            ("LADLE_STATE_DB", ":memory:"),
            ("LADLE_JOB_CONCURRENCY", "1"),
        ],
    )
    .await
}

/// The log lines whose message contains `text`.
fn logged(gateway: &LadleProcess, text: &str) -> Vec<Value> {
    gateway
        .lines()
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|l| l["message"].as_str().is_some_and(|m| m.contains(text)))
        .collect()
}

#[tokio::test]
async fn a_prompts_folder_moved_away_and_back_drops_no_prompt_and_fails_no_job() {
    let upstream = MockUpstream::start().await;
    upstream.cycle([paced_answer(&[r#"{"ideas": ["番茄炒蛋"]}"#], 30)]);
    let dir = prompts_copy();
    let gateway = serve_on(&dir, &upstream).await;
    let mut ids = Vec::new();
    for n in 0..5 {
        ids.push(job_id(submit(&gateway, &n.to_string()).await).await);
    }
    let away = dir.with_extension("away");
    std::fs::rename(&dir, &away).expect("the folder moves away");
    let ready = gateway.eventually_readyz(503).await;
    assert!(ready.contains("prompts_folder"), "{ready}");
    // Submitted while it is away: checked against the prompts still live.
    for n in 5..10 {
        ids.push(job_id(submit(&gateway, &n.to_string()).await).await);
    }
    for id in &ids {
        let job = job_after(&gateway, id, 10_000).await;
        assert_eq!(job["status"], "succeeded", "{job}");
    }
    std::fs::rename(&away, &dir).expect("the folder comes back");
    let ready = gateway.eventually_readyz(200).await;
    assert!(ready.contains("\"prompts\":2"), "{ready}");
    assert_eq!(
        logged(&gateway, "folder cannot be listed").len(),
        1,
        "one WARN, not one a reload"
    );
    assert_eq!(logged(&gateway, "listed again").len(), 1);
    assert_eq!(
        logged(&gateway, "prompt loaded").len(),
        2,
        "nothing was dropped and read again"
    );
}

#[tokio::test]
async fn emfile_during_a_reload_keeps_every_prompt() {
    let upstream = MockUpstream::start().await;
    upstream.fallback(ideas());
    let dir = prompts_copy();
    let gateway = serve_on(&dir, &upstream).await;
    let pid = gateway.pid().to_string();
    let open = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("its descriptors")
        .count();
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("its limits");
    let soft = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .expect("a soft limit")
        .to_owned();
    // The soft limit only, so that it can be raised again.
    let limit = format!("--nofile={}:", open + 4);
    let lowered = Command::new("prlimit")
        .args(["--pid", &pid, &limit])
        .status()
        .expect("prlimit (util-linux) runs");
    assert!(lowered.success());
    // Idle connections take the descriptors the reload would need.
    let mut idle = Vec::new();
    for _ in 0..16 {
        if let Ok(socket) = tokio::net::TcpStream::connect(gateway.address()).await {
            idle.push(socket);
        }
    }
    let warned = eventually(
        Duration::from_secs(5),
        "the WARN of an unlisted folder",
        async || {
            logged(&gateway, "folder cannot be listed")
                .into_iter()
                .next()
        },
    )
    .await;
    assert!(
        warned["error"]
            .as_str()
            .is_some_and(|e| e.contains("Too many open files")),
        "{warned}"
    );
    assert_eq!(warned["level"], "WARN");
    drop(idle);
    let raised = Command::new("prlimit")
        .args(["--pid", &pid, &format!("--nofile={soft}:")])
        .status()
        .expect("prlimit runs");
    assert!(raised.success());
    eventually(
        Duration::from_secs(5),
        "the folder listed again",
        async || logged(&gateway, "listed again").into_iter().next(),
    )
    .await;
    assert_eq!(
        logged(&gateway, "prompt loaded").len(),
        2,
        "nothing was dropped and read again"
    );
    let id = job_id(submit(&gateway, "后").await).await;
    assert_eq!(job_after(&gateway, &id, 5_000).await["status"], "succeeded");
    assert!(
        gateway
            .eventually_readyz(200)
            .await
            .contains("\"prompts\":2")
    );
}
