//! The `streams-ws` Lambda function: API Gateway's WebSocket API routes every event here.

use std::sync::Arc;

use aws_lambda_events::apigw::ApiGatewayWebsocketProxyRequest;
use lambda_runtime::{LambdaEvent, service_fn};
use shared::apigw::SignedApi;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    shared::http::init_tracing();
    let env = shared::config::Env::process();
    let state = shared::AppState::dynamodb_from_env().await;
    // The stage's Management API; without the setting, the one the first event names.
    let api = |endpoint: &str| Arc::new(SignedApi::in_lambda(endpoint, env).expect("Lambda sets AWS credentials"));
    let configured = env.ws_endpoint().map(api);
    let fallback: Arc<std::sync::OnceLock<Arc<SignedApi>>> = Arc::default();
    lambda_runtime::run(service_fn(move |e: LambdaEvent<ApiGatewayWebsocketProxyRequest>| {
        let store = state.store.clone();
        let poster = configured.clone().unwrap_or_else(|| {
            fallback.get_or_init(|| api(&streams_ws::endpoint_of(&e.payload))).clone()
        });
        async move { Ok::<_, lambda_runtime::Error>(streams_ws::handle(store.as_ref(), poster.as_ref(), e.payload).await) }
    }))
    .await
}
