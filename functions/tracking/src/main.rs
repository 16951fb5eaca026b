//! The `tracking` Lambda function: the public trip tracking page, its live data and its assets.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    shared::lambda::run(tracking::router()).await
}
