//! The public trip tracking page behind `trip_tracking_url`: `/track/{token}` (HTML), its live
//! data `/track/{token}/data` (JSON), its route as GPX 1.1 `/track/{token}/gpx` (Roam's export
//! `download_url`) and the page's assets `/track/assets/{file}`. No key: the unguessable token is
//! the only credential, and an unknown, malformed or deleted trip's token gets the same plain 404
//! page. Settings (`WAYMARK_TILE_URL` and kin): docs/tracking-page.md; following the trip's stream
//! instead of polling: docs/streams.md, "The trip tracking page".

use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use chrono::SecondsFormat;
use serde_json::{Value, json};
use shared::AppState;
use shared::domain::streams::{Filter, Scope, tokens};
use shared::domain::trips::{self, Trip, WaypointKind, eta, route};
use shared::http::route as add_route;
use shared::pages::{PageSettings, script_json, secure};
use shared::project::{KeyKind, Project};
use shared::time::Timestamp;

mod view;

/// At most this many route points go to the page (a long trip is thinned evenly, ends kept).
pub const MAX_ROUTE_POINTS: usize = 2000;

const LEAFLET_JS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/leaflet.js"));
const LEAFLET_CSS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/leaflet.css"));
const TRACK_JS: &str = include_str!("../assets/track.js");
const TRACK_CSS: &str = include_str!("../assets/track.css");
const PAGE_HTML: &str = include_str!("../assets/page.html");
const NOT_FOUND_HTML: &str = include_str!("../assets/not-found.html");

/// The page's settings, read from the environment once, when the router is built.
#[derive(Debug, Clone)]
pub struct PageConfig {
    pub tile_url: Option<String>,
    pub tile_attribution: String,
    pub refresh_seconds: u32,
    /// Where the page opens its trip's stream (a WebSocket URL, or a path on the page's origin);
    /// None: the page polls.
    pub stream_url: Option<String>,
}

/// How long a page's stream token lives; the page asks for a new one when it ends.
pub const STREAM_TOKEN_SECONDS: i64 = 3600;

impl PageConfig {
    pub fn from_env(env: &shared::config::Env) -> Self {
        let page = PageSettings::from_env(env);
        Self {
            tile_url: page.tile_url,
            tile_attribution: page.tile_attribution,
            refresh_seconds: env
                .get("WAYMARK_TRACKING_REFRESH_SECONDS")
                .and_then(|s| s.parse().ok())
                .filter(|s| (1..=3600).contains(s))
                .unwrap_or(15),
            stream_url: page.stream_url,
        }
    }

    /// This configuration, with `path` as the stream unless one is set (`waymark serve`).
    pub fn with_default_stream(mut self, path: &str) -> Self {
        self.stream_url.get_or_insert_with(|| path.to_owned());
        self
    }

    /// The Content-Security-Policy of the page ([`PageSettings::csp`]).
    pub fn csp(&self) -> String {
        let page = PageSettings {
            tile_url: self.tile_url.clone(),
            tile_attribution: String::new(),
            stream_url: self.stream_url.clone(),
        };
        page.csp()
    }
}

pub fn router() -> Router<AppState> {
    router_with(PageConfig::from_env(shared::config::Env::process()))
}

pub fn router_with(config: PageConfig) -> Router<AppState> {
    let page_cfg = config.clone();
    let data_cfg = config;
    let r = Router::new().route("/track/assets/{file}", get(asset));
    let r = add_route(
        r,
        "/track/{token}/",
        get(move |s: State<AppState>, p: Path<String>, uri: Uri| page(page_cfg.clone(), s, p, uri)),
    );
    let r = add_route(r, "/track/{token}/gpx/", get(gpx));
    add_route(
        r,
        "/track/{token}/data/",
        get(move |s: State<AppState>, p: Path<String>, q: RawQuery| data(data_cfg.clone(), s, p, q)),
    )
}

const NO_STORE: &str = "no-store";

fn not_found_page(csp: &str) -> Response {
    let res = (StatusCode::NOT_FOUND, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], NOT_FOUND_HTML);
    secure(res.into_response(), csp, NO_STORE)
}

/// The live trip of a token: None for a malformed, unknown, revoked, expired or deleted one (all
/// look the same).
async fn live_trip(s: &AppState, token: &str) -> Result<Option<Trip>, Response> {
    match trips::link::live_by_token(s.store.as_ref(), token, Timestamp::now()).await {
        Ok(t) => Ok(t),
        Err(e) => {
            tracing::error!("tracking lookup failed: {}", e.msg);
            Err(StatusCode::SERVICE_UNAVAILABLE.into_response())
        }
    }
}

async fn page(cfg: PageConfig, State(s): State<AppState>, Path(token): Path<String>, uri: Uri) -> Response {
    let csp = cfg.csp();
    let trip = match live_trip(&s, &token).await {
        Ok(Some(t)) => t,
        Ok(None) => return not_found_page(&csp),
        Err(res) => return secure(res, &csp, NO_STORE),
    };
    let initial = match trip_data(&s, &trip, &cfg, true).await {
        Ok(v) => v,
        Err(res) => return secure(res, &csp, NO_STORE),
    };
    // Relative links, so the page works behind any base path (API Gateway stages included).
    let (assets, data_url) = if uri.path().ends_with('/') {
        ("../assets/", "data".to_owned())
    } else {
        ("assets/", format!("{token}/data"))
    };
    let mut values = view::first_view(&initial, chrono::Utc::now()).pairs;
    values.extend([
        ("assets", assets.to_owned()),
        ("data_url", escape_html(&data_url)),
        ("tile_url", escape_html(cfg.tile_url.as_deref().unwrap_or(""))),
        ("tile_attribution", escape_html(&cfg.tile_attribution)),
        ("initial", script_json(&initial)),
    ]);
    let html = fill(PAGE_HTML, &values);
    let res = ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response();
    secure(res, &csp, NO_STORE)
}

/// The page's data; `?stream=1` also mints a new stream token (the page asks when its stream
/// ended), so a poll costs no write.
async fn data(cfg: PageConfig, State(s): State<AppState>, Path(token): Path<String>, q: RawQuery) -> Response {
    let csp = cfg.csp();
    let stream = q.0.is_some_and(|q| q.split('&').any(|p| p == "stream=1"));
    let res = match live_trip(&s, &token).await {
        Ok(Some(t)) => match trip_data(&s, &t, &cfg, stream).await {
            Ok(v) => axum::Json(v).into_response(),
            Err(res) => res,
        },
        Ok(None) => (StatusCode::NOT_FOUND, axum::Json(json!({"error": "not_found"}))).into_response(),
        Err(res) => res,
    };
    secure(res, &csp, NO_STORE)
}

/// The trip's route (as the summary's) as GPX 1.1: what the page draws, as a file. Named without
/// the trip's id, as the page shows none.
async fn gpx(State(s): State<AppState>, Path(token): Path<String>) -> Response {
    const CSP: &str = "default-src 'none'";
    let trip = match live_trip(&s, &token).await {
        Ok(Some(t)) => t,
        Ok(None) => {
            let res = (StatusCode::NOT_FOUND, axum::Json(json!({"error": "not_found"}))).into_response();
            return secure(res, CSP, NO_STORE);
        }
        Err(res) => return secure(res, CSP, NO_STORE),
    };
    // The trip's own project, taken from the stored trip (never from the request).
    let p = Project { project_id: trip.project_id.clone(), account_id: trip.account_id.clone(), kind: KeyKind::Secret };
    let doc = match trips::summary(s.store.as_ref(), &p, trip.api, &trip.id).await {
        Ok(sum) => {
            shared::domain::export::gpx_track("Trip route", sum.route.points.iter().map(|r| (&r.location).into()))
        }
        Err(e) => Err(e),
    };
    let res = match doc {
        Ok(body) => shared::GpxFile { filename: "trip.gpx".into(), body }.into_response(),
        Err(e) => {
            tracing::error!("tracking gpx failed: {}", e.msg);
            StatusCode::SERVICE_UNAVAILABLE.into_response()
        }
    };
    secure(res, CSP, NO_STORE)
}

async fn asset(Path(file): Path<String>) -> Response {
    let (ty, body): (&str, &'static [u8]) = match file.as_str() {
        "leaflet.js" => ("text/javascript; charset=utf-8", LEAFLET_JS),
        "leaflet.css" => ("text/css; charset=utf-8", LEAFLET_CSS),
        "track.js" => ("text/javascript; charset=utf-8", TRACK_JS.as_bytes()),
        "track.css" => ("text/css; charset=utf-8", TRACK_CSS.as_bytes()),
        _ => return not_found_page("default-src 'none'"),
    };
    let res = ([(header::CONTENT_TYPE, ty)], body).into_response();
    secure(res, "default-src 'none'", "public, max-age=3600")
}

fn ts(t: Timestamp) -> String {
    t.0.to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn kind_str(k: WaypointKind) -> &'static str {
    match k {
        WaypointKind::Origin => "origin",
        WaypointKind::Destination => "destination",
        WaypointKind::Stop => "stop",
    }
}

/// What the page shows, and nothing else: no ids, no user, no metadata, no project; with
/// `stream`, a token for the trip's stream while it is not ended.
async fn trip_data(s: &AppState, trip: &Trip, cfg: &PageConfig, stream: bool) -> Result<Value, Response> {
    // The trip's own project, taken from the stored trip (never from the request).
    let p = Project { project_id: trip.project_id.clone(), account_id: trip.account_id.clone(), kind: KeyKind::Secret };
    let now = Timestamp::now();
    let end = trip.ended_at.unwrap_or(now);
    let locs = trips::trip_locations(s.store.as_ref(), &p, trip, now).await.map_err(|e| {
        tracing::error!("tracking locations failed: {}", e.msg);
        StatusCode::SERVICE_UNAVAILABLE.into_response()
    })?;
    let pauses = trip.pause_intervals(end);
    let analysed = route::analyse(&locs, &pauses);
    let duration_s = trip.started_at.map(|st| route::active_seconds(st, end, &pauses)).unwrap_or(0);
    let points: Vec<[f64; 2]> =
        analysed.points.iter().map(|p| [p.location.coordinates.lng, p.location.coordinates.lat]).collect();
    let latest = analysed.points.last().map(|p| {
        json!({"coordinates": [p.location.coordinates.lng, p.location.coordinates.lat], "recorded_at": ts(p.location.recorded_at)})
    });
    let waypoints: Vec<Value> = trip
        .waypoints
        .iter()
        .map(|w| {
            json!({
                "kind": kind_str(w.kind),
                "name": w.name,
                "coordinates": [w.coordinates.lng, w.coordinates.lat],
                "radius_m": w.radius_m,
                "reached_at": w.reached_at.map(ts),
                "left_at": w.left_at.map(ts),
            })
        })
        .collect();
    let ended = trip.state == trips::TripState::Ended;
    let eta = eta::estimate(trip, &locs, now).map(|e| {
        json!({
            "target": if e.target == WaypointKind::Stop { "stop" } else { "destination" },
            "name": e.name,
            "arrival_at": ts(e.arrival_at),
            "distance_m": e.distance_m.round(),
            "arrived": e.arrived,
        })
    });
    let stream = match (&cfg.stream_url, stream && !ended) {
        (Some(url), true) => {
            let filter = Filter { scope: Scope::Trip(trip.id.clone()), types: None };
            let minted = tokens::mint(s.store.as_ref(), &p, filter, STREAM_TOKEN_SECONDS, None).await.map_err(|e| {
                tracing::error!("tracking stream token failed: {}", e.msg);
                StatusCode::SERVICE_UNAVAILABLE.into_response()
            })?;
            json!({"url": url, "token": minted.token})
        }
        _ => Value::Null,
    };
    Ok(json!({
        "state": trip.state.as_str(),
        "active": !ended,
        // Null once ended (openapi.yaml): the figures are final and the page stops polling.
        "refresh_seconds": (!ended).then_some(cfg.refresh_seconds),
        "started_at": trip.started_at.map(ts),
        "ended_at": trip.ended_at.map(ts),
        "distance_m": (analysed.distance_m * 10.0).round() / 10.0,
        "duration_s": duration_s,
        "latest": latest,
        "route": thin(points, MAX_ROUTE_POINTS),
        "waypoints": waypoints,
        "eta": eta,
        "generated_at": ts(now),
        "stream": stream,
    }))
}

/// At most `max` points, evenly spaced, first and last kept.
pub fn thin<T: Copy>(points: Vec<T>, max: usize) -> Vec<T> {
    let n = points.len();
    if n <= max || max < 2 {
        return points;
    }
    (0..max).map(|i| points[i * (n - 1) / (max - 1)]).collect()
}

pub(crate) fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `template` with each `{{name}}` replaced by its value, in one pass: a value is never searched
/// for placeholders again (a stop named `{{initial}}` stays text).
fn fill(template: &str, values: &[(&str, String)]) -> String {
    let mut out = String::with_capacity(template.len() * 2);
    let mut rest = template;
    while let Some(i) = rest.find("{{") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        match after.find("}}").and_then(|j| values.iter().find(|(k, _)| *k == &after[..j]).map(|(_, v)| (j, v))) {
            Some((j, v)) => {
                out.push_str(v);
                rest = &after[j + 2..];
            }
            None => {
                out.push_str("{{");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinning_keeps_ends() {
        let v: Vec<u32> = (0..10_000).collect();
        let t = thin(v, 100);
        assert_eq!(t.len(), 100);
        assert_eq!((t[0], t[99]), (0, 9_999));
        assert_eq!(thin(vec![1, 2, 3], 100), vec![1, 2, 3]);
    }

    #[test]
    fn fill_is_one_pass() {
        let v = [("a", "{{b}}".to_owned()), ("b", "B".to_owned())];
        assert_eq!(fill("x{{a}}y{{b}}z{{c}}{{", &v), "x{{b}}yBz{{c}}{{");
    }
}
