//! The `groups` Lambda function: state is built once per cold start, then the same router the
//! local server mounts answers API Gateway events.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    shared::lambda::run(groups::router()).await
}
