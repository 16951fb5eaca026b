//! The smallest axum server: the throughput floor for `waymark serve`.
//! Usage: hello-axum PORT (on 127.0.0.1).

use axum::Router;
use axum::routing::get;

#[tokio::main]
async fn main() {
    let port: u16 = std::env::args().nth(1).and_then(|p| p.parse().ok()).expect("usage: hello-axum PORT");
    let app = Router::new().route("/v1/api/user/", get(|| async { "hello" }));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("bind");
    axum::serve(listener, app).await.expect("serve");
}
