//! The `webhook-sender` Lambda function: delivers pending webhook messages.

use lambda_runtime::{LambdaEvent, service_fn};
use serde_json::Value;
use shared::domain::webhooks::deliver::{DeliveryConfig, Worker};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    shared::http::init_tracing();
    let state = shared::AppState::dynamodb_from_env().await;
    let worker = std::sync::Arc::new(Worker::new(
        state.store.clone(),
        DeliveryConfig::from_env(shared::config::Env::process()),
    )?);
    lambda_runtime::run(service_fn(move |e: LambdaEvent<Value>| {
        let worker = worker.clone();
        async move { processor::send(&worker, &e.payload).await }
    }))
    .await
}
