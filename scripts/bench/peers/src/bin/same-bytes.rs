//! An axum server answering `/NAME` with the file NAME of a directory, whole, as JSON: the bytes a
//! Waymark read answers with no work behind them, so a read's figure can be set against the cost of
//! sending its answer alone (HTTP, the socket, wrk reading it).
//! Usage: same-bytes PORT DIR (on 127.0.0.1).

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

type Bodies = Arc<HashMap<String, &'static [u8]>>;

async fn answer(State(bodies): State<Bodies>, Path(name): Path<String>) -> Response {
    match bodies.get(&name) {
        Some(body) => ([(header::CONTENT_TYPE, "application/json")], *body).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let usage = "usage: same-bytes PORT DIR";
    let port: u16 = args.next().and_then(|p| p.parse().ok()).expect(usage);
    let dir = args.next().expect(usage);
    let mut bodies = HashMap::new();
    for entry in std::fs::read_dir(&dir).expect("DIR") {
        let path = entry.expect("entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).expect("a file name").to_owned();
        bodies.insert(name, &*Vec::leak(std::fs::read(&path).expect("read")));
    }
    let app = Router::new().route("/{name}", get(answer)).with_state(Arc::new(bodies));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("bind");
    axum::serve(listener, app).await.expect("serve");
}
