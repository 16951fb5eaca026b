//! Insights (from the per-user places aggregate): `/v{1,3}/api/insights/home/`, `/work/`, `/poi/` for one user (Roam
//! documents both versions).

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use serde_json::{Value, json};
use shared::auth::SecretKey;
use shared::domain::insights::{self, Kind};
use shared::domain::users;
use shared::http::route;
use shared::{ApiError, AppState, Envelope, Params};

pub fn router() -> Router<AppState> {
    let mut r = Router::new();
    for v in ["v1", "v3"] {
        r = route(r, &format!("/{v}/api/insights/home/"), get(|k, s, q| answer(Kind::Home, "home", k, s, q)));
        r = route(r, &format!("/{v}/api/insights/work/"), get(|k, s, q| answer(Kind::Work, "work", k, s, q)));
        r = route(r, &format!("/{v}/api/insights/poi/"), get(|k, s, q| answer(Kind::Poi, "insights", k, s, q)));
    }
    r
}

async fn answer(
    kind: Kind,
    key: &'static str,
    SecretKey(p): SecretKey,
    State(s): State<AppState>,
    q: Params,
) -> Result<Envelope<Value>, ApiError> {
    q.only(&["user_id"])?;
    let store = s.store.as_ref();
    let user = users::require_ref(store, &p, "user_id", q.required("user_id")?).await?;
    let list = insights::insights(store, &p, &user.id, kind).await?;
    let data = json!({"user_id": user.id, "app_id": user.app_id(), key: list});
    Ok(Envelope::ok(shared::envelope::SUCCESS, data))
}
