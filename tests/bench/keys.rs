//! Client keys' cost (issue 22): the same loads through ladle without client
//! keys and through ladle with one key (no limit reached), side by side.

use sha2::Digest as _;

use crate::procs::{self, Proc};
use crate::side::{self, Side};

/// The one key every request of the run carries.
const KEY: &str = "lk_bench-key-0123456789abcdefghijklmnopqrstuv";

/// Runs the comparison against the fast mock.
pub async fn run(mock: &Proc, scale: f64, rounds: usize, ticks: u64) -> Result<Side, String> {
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
    let blocks = side::run(mock, [&off, &on], (scale, rounds, ticks), Some(KEY)).await;
    let heading = "## Client keys\n\nThe same loads through ladle without client keys and \
                   with one key (no limit reached), medians of paired rounds; on/off = keys \
                   on against keys off:";
    Ok(Side::new(heading.into(), ["off", "on"], blocks))
}

/// `LADLE_BENCH_BEFORE=path`: the ladle binary at `path` (an earlier build)
/// against this one, the same loads side by side.
pub async fn before(
    mock: &Proc,
    binary: &std::path::Path,
    scale: f64,
    rounds: usize,
    ticks: u64,
) -> Result<Side, String> {
    let earlier = procs::start_ladle_from(binary, mock.addr, &[])?;
    let now = procs::start_ladle(mock.addr, &[])?;
    let blocks = side::run(mock, [&earlier, &now], (scale, rounds, ticks), None).await;
    let heading = format!(
        "## Before and after\n\nThe same loads through `{}` (before) and this build \
         (after), medians of paired rounds; after/before:",
        binary.display()
    );
    Ok(Side::new(heading, ["before", "after"], blocks))
}
