//! Micro-benchmarks of the per-chunk path and of normalization, in-process.
//!
//! Each figure is the median of several timed runs; `black_box` keeps the
//! optimizer from dropping the work.

use std::hint::black_box;
use std::time::Instant;

use ladle::engine::normalize::{OutputKind, normalize};
use ladle::engine::upstream::chunk::{self, Parsed};
use ladle::engine::upstream::sse::SseDecoder;

const STREAM: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/stream-reasoning-then-content.sse"
));
const RECIPE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/recipe-raw-model-output.txt"
));

/// What the micro-benchmarks measured.
#[derive(Debug, Clone, Copy)]
pub struct Micro {
    /// SSE decoding plus chunk parsing and output detection, in MB/s.
    pub parse_mb_s: f64,
    /// The same, in ns per SSE event.
    pub parse_ns_per_chunk: f64,
    /// Events per pass over the input.
    pub chunks: usize,
    /// Extracting and normalizing the sample recipe, in µs.
    pub recipe_us: f64,
}

fn median(mut runs: Vec<f64>) -> f64 {
    runs.sort_by(f64::total_cmp);
    runs[runs.len() / 2]
}

/// Runs both micro-benchmarks; `scale` shrinks them for a quick run.
pub fn run(scale: f64) -> Micro {
    let copies = ((400.0 * scale) as usize).max(10);
    let input = STREAM.repeat(copies).into_bytes();
    // Reads of about one event each, as an upstream writing token by token sends them.
    let read = 256;
    let mut chunks = 0;
    let runs: Vec<f64> = (0..7)
        .map(|_| {
            let started = Instant::now();
            chunks = parse_all(black_box(&input), read);
            started.elapsed().as_secs_f64()
        })
        .collect();
    let seconds = median(runs);
    let iterations = ((2000.0 * scale) as usize).max(50);
    let recipe_runs: Vec<f64> = (0..7)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..iterations {
                let output = normalize(OutputKind::Recipe, black_box(RECIPE));
                black_box(output.is_ok());
            }
            started.elapsed().as_secs_f64() / iterations as f64
        })
        .collect();
    Micro {
        parse_mb_s: input.len() as f64 / seconds / 1e6,
        parse_ns_per_chunk: seconds * 1e9 / chunks as f64,
        chunks: chunks / copies,
        recipe_us: median(recipe_runs) * 1e6,
    }
}

/// Decodes the stream the way an attempt does and counts events; each chunk is
/// parsed and checked for output, with metadata wanted until output begins.
fn parse_all(input: &[u8], read: usize) -> usize {
    let mut decoder = SseDecoder::new(1 << 20);
    let mut events = 0;
    let mut output_began = false;
    for piece in input.chunks(read) {
        decoder.push(piece);
        while let Ok(Some(event)) = decoder.next_event() {
            events += 1;
            if event.data.trim_ascii().is_empty() {
                continue;
            }
            match chunk::parse(&event.data, !output_began) {
                Ok(Parsed::Chunk(chunk)) => output_began |= black_box(chunk.is_output()),
                Ok(Parsed::Done) => output_began = false,
                other => {
                    black_box(other.is_ok());
                }
            }
        }
    }
    events
}
