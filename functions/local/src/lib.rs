//! The `waymark` binary's library: every group's router on one port, and the admin commands.

pub mod allocator;
pub mod cli;
pub mod guard;
pub mod streams;

use axum::Router;
use shared::AppState;

/// Every endpoint group, as the Lambda functions serve them one by one.
pub fn routes() -> Router<AppState> {
    Router::new()
        .merge(users::router())
        .merge(locations::router())
        .merge(groups::router())
        .merge(trips::router())
        .merge(trips_v2::router())
        .merge(geofences::router())
        .merge(search::router())
        .merge(moving_geofences::router())
        .merge(insights::router())
        .merge(webhooks::router())
        .merge(keys::router())
        .merge(settings::router())
        .merge(tracking::router_with(
            tracking::PageConfig::from_env(shared::config::Env::process()).with_default_stream(streams::WS_PATH_SLASH),
        ))
        .merge(console::router_with(
            shared::pages::PageSettings::from_env(shared::config::Env::process())
                .with_default_stream(streams::WS_PATH_SLASH),
        ))
        .merge(streams::router())
}

/// The whole service over `state`, ready to serve.
pub fn app(state: AppState) -> Router {
    shared::http::service(routes(), state)
}

/// The background work of `waymark serve`: the events processor's sweep (finishes what a crash
/// or an error left past a user's watermark), unfinished erasures, the retention sweeper (removes
/// expired locations and events) and the webhook delivery worker.
pub fn background(state: &AppState) -> Result<(), String> {
    use shared::domain::webhooks::deliver::{DeliveryConfig, Worker};
    use shared::pipeline::processor;
    let store = state.store.clone();
    let wake = state.wake.clone();
    tokio::spawn(async move {
        // The first sweep, at once: work a crash left (the store is this process's alone, so
        // batches marked before it started are derived now: `processor` says which).
        let mut first = true;
        loop {
            match processor::sweep_queued(store.as_ref()).await {
                Ok((n, queued)) if n > 0 => {
                    let msg = if first {
                        "derived work left from before the start"
                    } else {
                        "sweep finished unprocessed locations"
                    };
                    tracing::info!(users = n, "{msg}");
                    if queued {
                        wake.notify_one();
                    }
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e.msg, "sweep failed"),
            }
            first = false;
            // Erasures a DELETE left unfinished (it answered 202).
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(processor::SWEEP_SECONDS);
            if let Err(e) = shared::pipeline::erasure::sweep(store.as_ref(), deadline).await {
                tracing::warn!(error = %e.msg, "erasure sweep failed");
            }
            tokio::time::sleep(std::time::Duration::from_secs(processor::SWEEP_SECONDS)).await;
        }
    });
    // Retention: bounded runs a minute apart (see shared::pipeline::retention for the rate).
    let store = state.store.clone();
    tokio::spawn(async move {
        use shared::pipeline::retention;
        loop {
            match retention::sweep(store.as_ref(), retention::Budget::run(), shared::time::Timestamp::now()).await {
                Ok(s) if s.items > 0 => {
                    tracing::info!(locations = s.locations, events = s.events, finished = s.finished, "retention sweep")
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e.msg, "retention sweep failed"),
            }
            tokio::time::sleep(std::time::Duration::from_secs(retention::SWEEP_SECONDS)).await;
        }
    });
    let worker = Worker::new(state.store.clone(), DeliveryConfig::from_env(shared::config::Env::process()))?;
    tokio::spawn(worker.run(state.wake.clone()));
    Ok(())
}
