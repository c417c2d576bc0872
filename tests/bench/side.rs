//! Two ladles side by side: the same loads through each, next to the mock itself
//! for the added TTFT, in paired rounds in rotating order; medians. Client keys
//! off against on (`keys.rs`), and an earlier build against this one
//! (`LADLE_BENCH_BEFORE`).

use std::fmt::Write as _;

use crate::load::{self, Load};
use crate::procs::Proc;
use crate::report::{Block, Row};

/// The loads of a side-by-side run.
const LOADS: [(&str, usize, f64, u32); 4] = [
    ("TTFT-only c=1", 1, 5_000.0, 1),
    ("TTFT-only c=50", 50, 10_000.0, 1),
    ("20 chunks c=1", 1, 200.0, 20),
    ("20 chunks c=50", 50, 3_000.0, 20),
];

/// What was measured, and how to name it.
pub struct Side {
    /// The section's heading and its first paragraph.
    pub heading: String,
    /// The two ladles' short names (`off`/`on`, `before`/`after`).
    pub names: [&'static str; 2],
    blocks: Vec<Block>,
}

/// Runs every load through the mock, `a` and `b` (each request with `bearer`).
pub async fn run(
    mock: &Proc,
    [a, b]: [&Proc; 2],
    (scale, rounds, ticks): (f64, usize, u64),
    bearer: Option<&'static str>,
) -> Vec<Block> {
    let paths = [mock, a, b];
    let client = load::client();
    let count = |n: f64| ((n * scale) as usize).max(100);
    let mut blocks = Vec::new();
    for (label, concurrency, requests, chunks) in LOADS {
        let shape = Load {
            concurrency,
            requests: count(requests),
            chunks,
            gap_ms: if chunks == 1 { 0 } else { 1 },
            keyed: false,
            bearer,
        };
        let runs = crate::measure(&client, &paths, shape, rounds, ticks).await;
        blocks.push(crate::aggregate(label, shape, &runs));
    }
    blocks
}

impl Side {
    /// The measured blocks, named.
    pub fn new(heading: String, names: [&'static str; 2], blocks: Vec<Block>) -> Side {
        Side {
            heading,
            names,
            blocks,
        }
    }

    /// The figures as Markdown.
    pub fn render(&self) -> String {
        let [a, b] = self.names;
        let mut out = format!(
            "{}\n\n| load | added TTFT p50 ms {a} / {b} | {b}/{a} | CPU ms/req {a} / {b} | \
             {b}/{a} | errors |\n|---|---|---|---|---|---|\n",
            self.heading
        );
        for block in &self.blocks {
            let [_, first, second] = &block.rows;
            let added = |row: &Row| row.added.map_or(f64::NAN, |a| a[0]);
            let _ = writeln!(
                out,
                "| {} | {:.3} / {:.3} | {:.2}× | {:.3} / {:.3} | {:.2}× | {} |",
                block.label,
                added(first),
                added(second),
                added(second) / added(first),
                first.cpu_ms,
                second.cpu_ms,
                second.cpu_ms / first.cpu_ms,
                first.errors + second.errors
            );
        }
        out
    }
}
