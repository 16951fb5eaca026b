//! The console: a project's users, trips, geofences, events and webhooks on a live map, for the
//! people who run a fleet (docs/console.md). The page (`/console/`) and its assets
//! (`/console/assets/{file}`) are public and hold nothing of a project; everything they show
//! comes from the public API with a console session, which the secret key opens
//! (`/v1/api/console/sessions/`, the keys function's; `shared::domain::keys::sessions`).

use axum::Router;
use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;
use shared::AppState;
use shared::http::route;
use shared::pages::{PageSettings, script_json, secure};

include!(concat!(env!("OUT_DIR"), "/assets.rs"));

/// Where the page's `{{CONFIG}}` is: a JSON data block it reads at start.
const CONFIG_MARK: &str = "{{CONFIG}}";

pub fn router() -> Router<AppState> {
    router_with(PageSettings::from_env(shared::config::Env::process()))
}

pub fn router_with(settings: PageSettings) -> Router<AppState> {
    let r = Router::new().route("/console/assets/{file}", get(asset));
    route(r, "/console/", get(move || page(settings.clone())))
}

fn asset_bytes(name: &str) -> Option<&'static [u8]> {
    ASSETS.binary_search_by(|(n, _)| (*n).cmp(name)).ok().map(|i| ASSETS[i].1)
}

async fn page(settings: PageSettings) -> Response {
    let csp = settings.csp();
    let Some(html) = asset_bytes("console.html") else {
        return secure(StatusCode::NOT_FOUND.into_response(), &csp, "no-store");
    };
    let config = json!({
        "tile_url": settings.tile_url,
        "tile_attribution": settings.tile_attribution,
        "stream_url": settings.stream_url,
    });
    let html = String::from_utf8_lossy(html).replacen(CONFIG_MARK, &script_json(&config), 1);
    let res = ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response();
    secure(res, &csp, "no-store")
}

fn content_type(name: &str) -> Option<&'static str> {
    Some(match name.rsplit_once('.')?.1 {
        "js" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "html" => "text/html; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "json" => "application/json",
        _ => return None,
    })
}

async fn asset(Path(file): Path<String>) -> Response {
    let none = "default-src 'none'";
    match (asset_bytes(&file), content_type(&file)) {
        (Some(body), Some(ty)) if file != "console.html" => {
            // Short: a deploy's new page must not meet an hour-old script.
            secure(([(header::CONTENT_TYPE, ty)], body).into_response(), none, "public, max-age=300")
        }
        _ => secure((StatusCode::NOT_FOUND, "not found").into_response(), none, "no-store"),
    }
}
