//! The `processor` Lambda function: derived work from the locations table's stream, and a
//! scheduled sweep.

use lambda_runtime::{LambdaEvent, service_fn};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    shared::http::init_tracing();
    shared::lambda::post_streams_from_env();
    let state = shared::AppState::dynamodb_from_env().await;
    let store = state.store.clone();
    lambda_runtime::run(service_fn(move |e: LambdaEvent<Value>| {
        let store = store.clone();
        async move { processor::process(store.as_ref(), e.payload).await }
    }))
    .await
}
