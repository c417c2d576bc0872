//! A full disk refuses writes, not reads: on a real 4 MiB tmpfs under the state
//! file, submits past the space left are `503 store_unavailable`, `/readyz`
//! answers `503` naming the state file, a job already written is still read,
//! and once space is freed, submits are accepted and `/readyz` is `200` again,
//! by itself. On the real binary; the test mounts the tmpfs (as root, as CI
//! runs).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::{fridge, job_id, submit};
use crate::support::mock_upstream::*;
use crate::support::process::LadleProcess;
use crate::support::*;

/// A tmpfs of `size` mounted at a folder of its own, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(label: &str, size: &str) -> Tmpfs {
        let dir = temp_dir(label);
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .status()
            .expect("mount runs");
        assert!(mounted.success(), "mounting a tmpfs needs root, as CI runs");
        Tmpfs(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[tokio::test]
async fn a_full_disk_refuses_writes_only_and_recovers_by_itself() {
    let disk = Tmpfs::mount("jobs-full-disk", "4m");
    let filler = disk.path().join("filler");
    std::fs::write(&filler, vec![7u8; 2_600_000]).expect("the filler is written");
    let upstream = MockUpstream::start().await;
    upstream.fallback(sse(vec![Step::Stall]));
    let db = disk.path().join("state.db");
    let env = [("LADLE_STATE_DB", db.to_str().expect("a UTF-8 path"))];
    let gateway = LadleProcess::start(&upstream.url, &env).await;
    let kept = job_id(submit(&gateway, "先").await).await;

    let mut heavy = fridge("满");
    heavy["notes"] = "笔记".repeat(33_000).into();
    let refused = eventually(Duration::from_secs(10), "a submit refused", async || {
        let response = gateway.post("/v1/tasks/fridge?async=true", &heavy).await;
        (response.status() == 503).then_some(response)
    })
    .await;
    let error = json_of(refused).await;
    assert_eq!(error["error"]["code"], "store_unavailable", "{error}");
    let ready = gateway.eventually_readyz(503).await;
    assert!(ready.contains("\"state_file\""), "{ready}");
    assert!(
        !ready.contains(disk.path().to_str().expect("text")),
        "no path: {ready}"
    );
    let read = gateway.get(&format!("/v1/jobs/{kept}")).await;
    assert_eq!(read.status(), 200, "a read does not need the disk's space");
    // The gauge is counted once a second: the filled disk shows at its next count.
    eventually(
        Duration::from_secs(5),
        "the free space reported low",
        async || {
            let free = gateway.metric("ladle_state_free_bytes").await;
            (free < 1_048_576.0).then_some(())
        },
    )
    .await;

    std::fs::remove_file(&filler).expect("space is freed");
    eventually(
        Duration::from_secs(10),
        "a submit accepted again",
        async || {
            let response = submit(&gateway, "后").await;
            (response.status() == 202).then_some(())
        },
    )
    .await;
    gateway.eventually_readyz(200).await;
}
