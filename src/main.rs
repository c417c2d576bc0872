//! The `ladle` binary: parses the command line and hands over to the library.

use std::process::ExitCode;

use clap::Parser;

/// mimalloc rather than glibc's malloc: the relay allocates and frees small
/// buffers for every chunk, and glibc's allocator showed up high in the profile
/// under load (docs/performance.md, "What each design choice costs or saves").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    ladle::cli::run(ladle::cli::Cli::parse())
}
