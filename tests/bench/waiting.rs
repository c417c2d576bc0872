//! What reads waiting on one job cost (issue 29): many `wait_ms` reads of one
//! queued job, each on a connection of its own; ladle's CPU and RSS while they
//! wait, and how long until all are answered once the job ends.

use std::time::{Duration, Instant};

use crate::jobs::body;
use crate::load;
use crate::procs::{self, Proc};

/// What reads waiting on one job cost (issue 29).
pub struct Waiting {
    readers: usize,
    /// CPU of ladle per second while they wait, in ms.
    cpu_ms_per_s: f64,
    /// RSS added per waiting read, in KiB.
    kib_each: f64,
    /// From the job's end to every read answered, in ms.
    answered_ms: f64,
    errors: usize,
}

/// `readers` reads of one queued job waiting (`wait_ms=60000`), each on a
/// connection of its own: ladle's CPU and RSS while they wait, and how long
/// until all are answered once the job is canceled.
pub async fn long_polls(ladle: &Proc, readers: usize) -> Result<Waiting, String> {
    let client = load::client();
    let base = format!("http://{}", ladle.addr);
    let submitted = load::post_json(
        &client,
        format!("{base}/v1/tasks/bench?async=true"),
        body(0),
    )
    .send()
    .await
    .map_err(|e| e.to_string())?;
    let job: serde_json::Value = submitted.json().await.map_err(|e| e.to_string())?;
    let id = job["id"].as_str().ok_or("no job id")?.to_owned();
    let before = ladle.rss_kib();
    let url = format!("{base}/v1/jobs/{id}?wait_ms=60000");
    let reads: Vec<_> = (0..readers)
        .map(|_| {
            // A client each: every read holds a connection of its own.
            let (client, url) = (load::client(), url.clone());
            tokio::spawn(async move {
                let read = client.get(&url).send().await.ok()?;
                let job: serde_json::Value = read.json().await.ok()?;
                Some(job["status"] == "canceled")
            })
        })
        .collect();
    let metrics = format!("{base}/metrics");
    let all_waiting = format!("ladle_job_waiters {readers}");
    for _ in 0..200 {
        let text = client
            .get(&metrics)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if text.text().await.unwrap_or_default().contains(&all_waiting) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ticks = procs::clock_ticks();
    let (cpu, at) = (ladle.cpu_ns(ticks), Instant::now());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let cpu_ms_per_s = (ladle.cpu_ns(ticks) - cpu) as f64 / 1e6 / at.elapsed().as_secs_f64();
    let kib_each = ladle.rss_kib().saturating_sub(before) as f64 / readers as f64;
    let ended = Instant::now();
    client
        .delete(format!("{base}/v1/jobs/{id}"))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let mut errors = 0;
    for read in reads {
        if read.await.ok().flatten() != Some(true) {
            errors += 1;
        }
    }
    Ok(Waiting {
        readers,
        cpu_ms_per_s,
        kib_each,
        answered_ms: ended.elapsed().as_secs_f64() * 1e3,
        errors,
    })
}

impl Waiting {
    /// The figures as Markdown.
    pub fn render(&self) -> String {
        format!(
            "\n{} reads waiting (`wait_ms=60000`) on one queued job, a connection each \
             (SQLite file): ladle's CPU {:.1} ms per second while they wait, RSS \
             {:.1} KiB per waiting read; all answered {:.1} ms after the job's cancel; \
             {} errors.\n",
            self.readers, self.cpu_ms_per_s, self.kib_each, self.answered_ms, self.errors
        )
    }
}
