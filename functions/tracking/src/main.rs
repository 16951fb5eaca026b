//! The `tracking` Lambda function: the public trip tracking page, its live data and its assets.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::init_tracing();
    let state = shared::AppState::dynamodb_from_env().await;
    shared::lambda::run(tracking::router(), state).await
}
