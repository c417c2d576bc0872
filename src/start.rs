//! The one start: every loop that runs beside the requests begins here, once, and
//! is owned by the app's `Background`, which a shutdown drains. Building the
//! state (`AppState::new`) starts nothing, so a state can be built and checked
//! without a runtime; `server::serve` calls `start` inside the runtime that
//! serves.

use std::time::Duration;

use crate::background::Continue;
use crate::config::{ConfigError, StartError};
use crate::request::job_run::RunsTasks;
use crate::state::AppState;

/// How often histogram samples are folded into their buckets (as the exporter's
/// own upkeep thread would).
const METRICS_UPKEEP: Duration = Duration::from_secs(5);

impl AppState {
    /// Starts every background loop: the fleet's rounds with Redis (budgets,
    /// client counts, claims, its persistence), the prompt and key reloads, the
    /// metrics' upkeep, the job runner and the webhook sender.
    pub fn start(&self) -> Result<(), StartError> {
        let background = &self.background;
        if let Some(redis) = &self.redis {
            let window = self.config.budget.window;
            crate::budget::redis::share(&self.redis_budgets, redis.clone(), window, background);
            crate::fleet::watch_persistence(redis.clone(), background);
            if let Some(clients) = &self.clients {
                crate::clients::redis::share(clients.clone(), redis.clone(), background);
            }
        }
        self.idempotency.start(background);
        let reload = self.config.prompt_reload;
        let prompts = self.prompts.clone();
        background.every(reload, None, move || {
            let prompts = prompts.clone();
            async move {
                // File reads block; keep them off the async workers.
                let _ = tokio::task::spawn_blocking(move || prompts.refresh()).await;
                Continue::Yes
            }
        });
        if let Some(clients) = self.clients.clone() {
            // As often as the prompts folder is looked at: an edit is live within 2 s.
            background.every(reload, None, move || {
                let clients = clients.clone();
                async move {
                    let _ = tokio::task::spawn_blocking(move || clients.refresh()).await;
                    Continue::Yes
                }
            });
        }
        // Histogram samples wait in memory until they are folded into their
        // buckets: without this, a gateway nobody scrapes would keep every one.
        let metrics = self.metrics.clone();
        background.every(METRICS_UPKEEP, None, move || {
            metrics.upkeep();
            std::future::ready(Continue::Yes)
        });
        // The runner reaches the app through a weak handle: the app owns the
        // runner, and neither keeps the other alive.
        self.jobs
            .start(std::sync::Arc::new(RunsTasks::of(self)), background);
        if let Some(webhook) = &self.config.jobs.webhook {
            let store = self.jobs.store().clone();
            let (settings, metrics) = (webhook.clone(), self.metrics.clone());
            let tick = self.config.jobs.runner.tick;
            // Finished jobs are promised a delivery: without a sender, ladle does
            // not start.
            crate::jobs::webhooks::send::start(store, settings, metrics, tick, background)
                .map_err(|problem| ConfigError::Invalid {
                    key: "LADLE_JOB_WEBHOOK_URL",
                    problem,
                })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::state::AppState;

    #[tokio::test]
    async fn once_its_loops_are_drained_nothing_holds_the_app() {
        let env = |key: &str| match key {
            "LADLE_UPSTREAM_URL" => Some("http://127.0.0.1:9/v1".to_owned()),
            "LADLE_STATE_DB" => Some(":memory:".to_owned()),
            "LADLE_PROMPTS_DIR" => Some("/nonexistent/prompts".to_owned()),
            _ => None,
        };
        let config = Config::load(None, &env).expect("a valid config");
        let state = AppState::new(config).expect("the state builds");
        state.start().expect("the loops start");
        let (weak, background) = (state.downgrade(), state.background.clone());
        drop(state);
        let limit = std::time::Duration::from_secs(5);
        assert!(background.drain(limit).await, "every loop ends");
        assert!(weak.upgrade().is_none(), "something still holds the app");
    }
}
