//! Contract section 10, Bounds: no input, from a client, an upstream, a prompt
//! file or the environment, makes ladle use memory, time, disk or labels without
//! bound, or lose an admin write.

mod answers;
mod config;
mod heads;
mod idempotency;
mod metrics;
mod nutrition;
mod prompt_files;
mod prompt_folder;
mod templates;
mod upstream_words;
