//! Tasks from operator-edited prompt templates.
//!
//! `spec` turns a TOML file into a checked, compiled prompt (pure); `render` binds a
//! caller's variables and renders messages (pure); `store` keeps the live prompts
//! and their history behind a small interface whose first implementation is files.

pub mod render;
pub mod spec;
pub mod store;

pub use spec::{Prompt, PromptError, valid_name};
pub use store::{FileStore, PromptStore, StoreError};

#[cfg(test)]
mod tests;
