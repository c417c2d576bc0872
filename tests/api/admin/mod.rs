//! The admin API (contract section 4) from outside: auth, saving with ETags,
//! validation positions, names and symlinks that could escape the prompts folder,
//! rendering, history, rollback, and that a save is live for the next task call.

mod auth;
mod history;
mod paths;
mod render;
mod replicas;
mod saving;
mod status;
mod try_task;
