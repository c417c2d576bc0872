//! Client keys' cost (issue 22): the same loads, in one run, through ladle without
//! client keys and through ladle with one key (no limit reached), next to the mock
//! itself for the added TTFT; paired rounds in rotating order, medians.

use std::fmt::Write as _;

use sha2::Digest as _;

use crate::load::{self, Load};
use crate::procs::{self, Proc};
use crate::report::Block;

/// The one key every request of the run carries.
const KEY: &str = "lk_bench-key-0123456789abcdefghijklmnopqrstuv";

/// The blocks measured: direct, keys off, keys on.
pub struct Keys {
    blocks: Vec<Block>,
}

/// Runs the comparison against the fast mock.
pub async fn run(mock: &Proc, scale: f64, rounds: usize, ticks: u64) -> Result<Keys, String> {
    let dir = procs::scratch_dir("keys")?;
    let digest: String = sha2::Sha256::digest(KEY.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let file = dir.join("keys.toml");
    std::fs::write(
        &file,
        format!("[[keys]]\nname = \"bench\"\nsha256 = \"{digest}\"\n"),
    )
    .map_err(|e| e.to_string())?;
    let off = procs::start_ladle(mock.addr, &[])?;
    let on = procs::start_ladle(
        mock.addr,
        &[("LADLE_CLIENT_KEYS_FILE", file.display().to_string())],
    )?;
    let paths = [mock, &off, &on];
    let client = load::client();
    let count = |n: f64| ((n * scale) as usize).max(100);
    let mut blocks = Vec::new();
    for (label, concurrency, requests, chunks) in [
        ("TTFT-only c=1", 1, count(5_000.0), 1),
        ("TTFT-only c=50", 50, count(10_000.0), 1),
        ("20 chunks c=1", 1, count(200.0), 20),
        ("20 chunks c=50", 50, count(3_000.0), 20),
    ] {
        let shape = Load {
            concurrency,
            requests,
            chunks,
            gap_ms: if chunks == 1 { 0 } else { 1 },
            keyed: false,
            bearer: Some(KEY),
        };
        let runs = crate::measure(&client, &paths, shape, rounds, ticks).await;
        blocks.push(crate::aggregate(label, shape, &runs));
    }
    Ok(Keys { blocks })
}

impl Keys {
    /// The figures as Markdown.
    pub fn render(&self) -> String {
        let mut out = String::from(
            "## Client keys\n\nThe same loads through ladle without client keys and with one \
             key (no limit reached), medians of paired rounds; on/off = keys on against \
             keys off:\n\n\
             | load | added TTFT p50 ms off / on | on/off | CPU ms/req off / on | on/off | errors |\n\
             |---|---|---|---|---|---|\n",
        );
        for block in &self.blocks {
            let [_, off, on] = &block.rows;
            let added = |row: &crate::report::Row| row.added.map_or(f64::NAN, |a| a[0]);
            let _ = writeln!(
                out,
                "| {} | {:.3} / {:.3} | {:.2}× | {:.3} / {:.3} | {:.2}× | {} |",
                block.label,
                added(off),
                added(on),
                added(on) / added(off),
                off.cpu_ms,
                on.cpu_ms,
                on.cpu_ms / off.cpu_ms,
                off.errors + on.errors
            );
        }
        out
    }
}
