//! `/v1/api/webhooks/`: endpoints that receive events (Standard Webhooks), their secrets, test
//! events, the delivery log and replay. Secret API key only.

use axum::Router;
use axum::extract::State;
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};
use shared::auth::SecretKey;
use shared::domain::webhooks::outbox::{self, ReplaySet, Status};
use shared::domain::webhooks::{self, CreateEndpoint, UpdateEndpoint, deliver, endpoint_json};
use shared::http::route;
use shared::time::DateRange;
use shared::{ApiError, ApiJson, AppState, Envelope, Params};

const BASE: &str = "/v1/api/webhooks/";

pub fn router() -> Router<AppState> {
    let r = route(Router::new(), BASE, post(create).get(read).put(update).delete(delete));
    let r = route(r, "/v1/api/webhooks/rotate-secret/", post(rotate));
    let r = route(r, "/v1/api/webhooks/test/", post(test));
    let r = route(r, "/v1/api/webhooks/deliveries/", get(deliveries));
    route(r, "/v1/api/webhooks/replay/", post(replay))
}

async fn create(
    SecretKey(p): SecretKey,
    State(s): State<AppState>,
    ApiJson(body): ApiJson<CreateEndpoint>,
) -> Result<Envelope<Value>, ApiError> {
    let e = webhooks::create(s.store.as_ref(), &p, body, s.config.allow_private_webhooks).await?;
    Ok(Envelope::created("Webhook created", endpoint_json(&e, true)))
}

/// One endpoint with `?webhook_id=`, else all of them.
async fn read(SecretKey(p): SecretKey, State(s): State<AppState>, q: Params) -> Result<Envelope<Value>, ApiError> {
    let store = s.store.as_ref();
    if let Some(id) = q.opt("webhook_id") {
        let e = webhooks::get(store, &p, id).await?;
        return Ok(Envelope::ok("Webhook found", endpoint_json(&e, false)));
    }
    let list = webhooks::list(store, &p).await?;
    let data = json!({"webhooks": list.iter().map(|e| endpoint_json(e, false)).collect::<Vec<_>>()});
    Ok(Envelope::ok("Webhooks listed", data))
}

async fn update(
    SecretKey(p): SecretKey,
    State(s): State<AppState>,
    ApiJson(body): ApiJson<UpdateEndpoint>,
) -> Result<Envelope<Value>, ApiError> {
    let e = webhooks::update(s.store.as_ref(), &p, body, s.config.allow_private_webhooks).await?;
    s.wake.notify_one();
    Ok(Envelope::ok("Webhook updated", endpoint_json(&e, false)))
}

async fn delete(SecretKey(p): SecretKey, State(s): State<AppState>, q: Params) -> Result<Envelope<Value>, ApiError> {
    q.only(&["webhook_id"])?;
    let id = q.required("webhook_id")?;
    webhooks::delete(s.store.as_ref(), &p, id).await?;
    Ok(Envelope::ok("Webhook deleted", json!({"webhook_id": id})))
}

#[derive(Debug, Deserialize)]
struct WebhookId {
    webhook_id: String,
}

async fn rotate(
    SecretKey(p): SecretKey,
    State(s): State<AppState>,
    ApiJson(b): ApiJson<WebhookId>,
) -> Result<Envelope<Value>, ApiError> {
    let e = webhooks::rotate_secret(s.store.as_ref(), &p, &b.webhook_id).await?;
    Ok(Envelope::ok("Webhook secret rotated", endpoint_json(&e, true)))
}

async fn test(
    SecretKey(p): SecretKey,
    State(s): State<AppState>,
    ApiJson(b): ApiJson<WebhookId>,
) -> Result<Envelope<Value>, ApiError> {
    let store = s.store.as_ref();
    let e = webhooks::get(store, &p, &b.webhook_id).await?;
    let id = deliver::send_test(store, &p, &e).await?;
    s.wake.notify_one();
    Ok(Envelope::created("Test event queued", json!({"webhook_id": e.id, "event_id": id})))
}

async fn deliveries(
    SecretKey(p): SecretKey,
    State(s): State<AppState>,
    q: Params,
) -> Result<Envelope<Value>, ApiError> {
    let store = s.store.as_ref();
    let e = webhooks::get(store, &p, q.required("webhook_id")?).await?;
    let status = q.opt("status").map(Status::parse).transpose()?;
    let (list, info) = outbox::deliveries(store, &p, &e.id, status, q.page_number()?).await?;
    let data = json!({
        "next_page": info.next_page, "pages": info.pages, "prev_page": info.prev_page,
        "webhook_id": e.id,
        "deliveries": list.iter().map(outbox::delivery_json).collect::<Vec<_>>(),
    });
    Ok(Envelope::ok("Deliveries listed", data))
}

#[derive(Debug, Deserialize)]
struct ReplayBody {
    webhook_id: String,
    #[serde(default)]
    since: Option<String>,
    #[serde(default)]
    until: Option<String>,
    #[serde(default)]
    event_ids: Option<Vec<String>>,
}

async fn replay(
    SecretKey(p): SecretKey,
    State(s): State<AppState>,
    ApiJson(b): ApiJson<ReplayBody>,
) -> Result<Envelope<Value>, ApiError> {
    let store = s.store.as_ref();
    let e = webhooks::get(store, &p, &b.webhook_id).await?;
    let set = match (&b.event_ids, &b.since) {
        (Some(_), Some(_)) => {
            return Err(ApiError::field("event_ids", "give either event_ids or since/until, not both"));
        }
        (Some(ids), None) => {
            if ids.is_empty() || ids.len() > outbox::MAX_REPLAY {
                return Err(ApiError::field("event_ids", format!("must hold 1 to {} event ids", outbox::MAX_REPLAY)));
            }
            ReplaySet::Ids(ids.clone())
        }
        (None, Some(since)) => {
            let until = b.until.clone().unwrap_or_else(|| shared::time::Timestamp::now().format(None));
            let range = DateRange::parse_fields(("since", since), ("until", &until))?;
            ReplaySet::Range(range)
        }
        (None, None) => return Err(ApiError::field("since", "give since (and optionally until) or event_ids")),
    };
    let n = outbox::replay(store, &p, &e, set).await?;
    s.wake.notify_one();
    Ok(Envelope::ok("Replay queued", json!({"webhook_id": e.id, "queued": n})))
}
