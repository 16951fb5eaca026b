//! The `locations` Lambda function: state is built once per cold start, then the same router the
//! local server mounts answers API Gateway events.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    // Its passes and trip changes commit stream messages: posted to WebSocket connections.
    shared::lambda::post_streams_from_env();
    shared::lambda::run(locations::router()).await
}
