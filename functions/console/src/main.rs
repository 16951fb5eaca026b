//! The `console` Lambda function: the console's page, its assets and its sessions.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    shared::lambda::run(console::router()).await
}
