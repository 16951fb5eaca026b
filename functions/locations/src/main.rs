//! The `locations` Lambda function: state is built once per cold start, then the same router the
//! local server mounts answers API Gateway events.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::init_tracing();
    // Its passes and trip changes commit stream messages: posted to WebSocket connections.
    shared::lambda::post_streams_from_env();
    let state = shared::AppState::dynamodb_from_env().await;
    shared::lambda::run(locations::router(), state).await
}
