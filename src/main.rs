//! The `ladle` binary: parses the command line and hands over to the library.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    ladle::cli::run(ladle::cli::Cli::parse())
}
