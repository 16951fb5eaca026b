//! The tracking page, its data and assets through the whole service's router (no sockets), on the
//! embedded store and on DynamoDB Local (scripts/test.sh starts it): what a token shows, what it
//! hides, 404s for unknown, malformed and deleted trips, and the headers.
#![allow(clippy::disallowed_methods)] // tests and tools read their own settings from the environment

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use shared::AppState;
use shared::domain::projects::{self, ChosenKeys, IssuedProject};
use shared::domain::trips::{self, Api};
use shared::project::{KeyKind, Project};
use shared::store::{DynamoStore, EmbeddedStore, Store, TableNames};
use tower::ServiceExt;

struct App {
    state: AppState,
    router: Router,
    project: IssuedProject,
}

struct Res {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: String,
}

impl Res {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|_| panic!("not JSON ({}): {}", self.status, self.body))
    }
    fn header(&self, name: &str) -> &str {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
    }
}

impl App {
    async fn new(dynamo: bool) -> Self {
        let state = if dynamo {
            assert!(
                std::env::var_os("AWS_ENDPOINT_URL_DYNAMODB").is_some(),
                "AWS_ENDPOINT_URL_DYNAMODB is not set: run the tests with scripts/test.sh, which starts DynamoDB Local"
            );
            let store =
                DynamoStore::from_env(TableNames::with_prefix(&format!("tracking-{}-", std::process::id()))).await;
            store.ensure_tables().await.expect("tables");
            AppState::new(store)
        } else {
            AppState::new(EmbeddedStore::memory().expect("memory store"))
        };
        Self::with_router(state, None)
    }

    /// The whole service, or (with `tracking`) v1/v3 trips beside a tracking router of its own.
    fn with_router(state: AppState, tracking: Option<Router<AppState>>) -> Self {
        let project =
            futures_block(projects::create(state.store.as_ref(), "t", &ChosenKeys::default())).expect("project");
        let routes = match tracking {
            Some(t) => ::trips::router().merge(t),
            None => local::routes(),
        };
        let router = shared::http::service(routes, state.clone());
        Self { state, router, project }
    }

    async fn call(&self, method: &str, uri: &str, key: Option<(&str, String)>, body: Option<Value>) -> Res {
        let mut req = Request::builder().method(method).uri(uri);
        if let Some((name, value)) = key {
            req = req.header(name, value);
        }
        let body = match body {
            Some(b) => {
                req = req.header(header::CONTENT_TYPE, "application/json");
                Body::from(b.to_string())
            }
            None => Body::empty(),
        };
        let res = self.router.clone().oneshot(req.body(body).expect("request")).await.expect("infallible");
        let status = res.status();
        let headers = res.headers().clone();
        let bytes = res.into_body().collect().await.expect("body").to_bytes();
        Res { status, headers, body: String::from_utf8_lossy(&bytes).into_owned() }
    }

    fn secret(&self) -> Option<(&'static str, String)> {
        Some(("Api-Key", self.project.api_key.clone()))
    }
    fn bearer(&self) -> Option<(&'static str, String)> {
        Some(("Authorization", format!("Bearer {}", self.project.access_token)))
    }

    async fn ok(&self, method: &str, uri: &str, key: Option<(&'static str, String)>, body: Value) -> Value {
        let res = self.call(method, uri, key, Some(body)).await;
        assert!(res.status.is_success(), "{method} {uri}: {} {}", res.status, res.body);
        res.json()
    }

    async fn get(&self, uri: &str) -> Res {
        self.call("GET", uri, None, None).await
    }
}

/// Project creation is async but `with_router` is not: run it on the current runtime.
fn futures_block<F: std::future::Future>(f: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
}

fn ts(minutes_ago: i64, seconds: i64) -> String {
    (chrono::Utc::now() - chrono::Duration::minutes(minutes_ago) + chrono::Duration::seconds(seconds))
        .format("%Y-%m-%dT%H:%M:%S%.3f")
        .to_string()
}

const DEPOT: [f64; 2] = [13.377, 52.5163];
const DROP: [f64; 2] = [13.399, 52.5163];

/// Ten fixes at the depot, then a drive east: every fix in the last hour.
fn fixes() -> Vec<Value> {
    (0..60)
        .map(|i| {
            let f = if i < 10 { 0.0 } else { (i - 10) as f64 / 49.0 };
            let lng = DEPOT[0] + (DROP[0] - DEPOT[0]) * f;
            json!({"coordinates": [lng, DEPOT[1]], "recorded_at": ts(50, i * 10), "accuracy": 5})
        })
        .collect()
}

fn security_headers(res: &Res, what: &str) {
    let csp = res.header("content-security-policy");
    for part in ["default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"] {
        assert!(csp.contains(part), "{what}: CSP {csp}");
    }
    assert_eq!(res.header("referrer-policy"), "no-referrer", "{what}");
    assert_eq!(res.header("x-content-type-options"), "nosniff", "{what}");
}

/// A v2 trip with named stops (one name tries to break out of the page), started and driven.
async fn scenario(app: App) {
    let user = app.ok("POST", "/v1/api/user/", app.secret(), json!({"app_type": 1, "device_token": "t"})).await["data"]
        ["user_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let evil = "</script><img src=x onerror=alert(1)>";
    let body = json!({"user_id": user, "name": "Secret name", "metadata": {"order": "hidden-42"}, "stops": [
        {"name": "Depot", "description": "hidden description", "geometry": {"type": "Point", "coordinates": DEPOT}, "geometry_radius": 50},
        {"name": evil, "geometry": {"type": "Point", "coordinates": DROP}, "geometry_radius": 50},
    ]});
    let trip = app.ok("POST", "/v2/trips/", app.bearer(), body).await["trip"].clone();
    let id = trip["id"].as_str().unwrap().to_owned();
    let p = Project {
        project_id: app.project.project_id.clone(),
        account_id: app.project.account_id.clone(),
        kind: KeyKind::Secret,
    };
    let token = trips::get(app.state.store.as_ref(), &p, Api::V2, &id).await.unwrap().tracking_token;
    assert_eq!(token.len(), 32, "128-bit token, hex");

    // Created, not started: the page works, no route yet, still polling.
    let d = app.get(&format!("/track/{token}/data")).await.json();
    assert_eq!((d["state"].as_str(), d["active"].as_bool()), (Some("created"), Some(true)), "{d}");
    assert!(d["latest"].is_null() && d["route"].as_array().unwrap().is_empty(), "{d}");

    app.ok(
        "POST",
        &format!("/v2/trips/{id}/controls"),
        app.bearer(),
        json!({"action": "start", "started_at": ts(51, 0)}),
    )
    .await;
    let locs = fixes();
    for chunk in locs.chunks(40) {
        let body = json!({"user_id": user, "locations": chunk});
        app.ok("POST", "/v1/api/location/", Some(("Api-Key", app.project.publishable_key.clone())), body).await;
    }

    let page = app.get(&format!("/track/{token}")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    security_headers(&page, "page");
    assert_eq!(page.header("cache-control"), "no-store");
    assert!(page.header("content-type").starts_with("text/html"));
    assert!(page.body.contains("href=\"assets/leaflet.css\"") && page.body.contains(&format!("{token}/data")));
    assert!(!page.body.contains("<img src=x"), "stop name escaped in the page");
    for hidden in [user.as_str(), &id, &app.project.project_id, "Secret name", "hidden-42", "hidden description"] {
        assert!(!page.body.contains(hidden), "page shows {hidden}");
    }
    // The first view is rendered by the server: state, ETA, figures and places without a script.
    for text in [
        "data-state=\"started\">On the way</span>",
        "data-eta=\"arrived\">Arrived at &lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;</p>",
        "<div class=\"wp-name\">Stop · Depot</div><div class=\"wp-times\">Arrived ",
        " km</dd>",
        " ago)</dd>",
    ] {
        assert!(page.body.contains(text), "first view lacks {text}: {}", page.body);
    }
    assert!(!page.body.contains("{{"), "every placeholder filled");
    // A live region of its own for what changes (the script fills it, politely), empty at first:
    // the page itself is the first reading.
    assert!(
        page.body.contains(
            "<p id=\"live\" class=\"sr-only\" role=\"status\" aria-live=\"polite\" aria-atomic=\"true\"></p>"
        ),
        "live region: {}",
        page.body
    );
    let start = page.body.find("<script type=\"application/json\" id=\"initial\">").unwrap();
    let end = start + page.body[start..].find("</script>").unwrap();
    let initial: Value = serde_json::from_str(&page.body[start + 45..end]).expect("initial JSON");
    assert_eq!(initial["waypoints"][1]["name"], evil, "the name itself is kept, as data");

    // The trailing-slash form links one level up.
    let slash = app.get(&format!("/track/{token}/")).await;
    assert_eq!(slash.status, StatusCode::OK);
    assert!(slash.body.contains("href=\"../assets/track.css\"") && slash.body.contains("data-data-url=\"data\""));

    let res = app.get(&format!("/track/{token}/data/")).await;
    assert_eq!(res.status, StatusCode::OK);
    assert_eq!(res.header("cache-control"), "no-store");
    security_headers(&res, "data");
    let d = res.json();
    let keys: Vec<&str> = d.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "active",
            "distance_m",
            "duration_s",
            "ended_at",
            "eta",
            "generated_at",
            "latest",
            "refresh_seconds",
            "route",
            "started_at",
            "state",
            "stream",
            "waypoints"
        ]
    );
    assert_eq!(d["state"], "started");
    assert_eq!(d["refresh_seconds"], 15);
    let dist = d["distance_m"].as_f64().unwrap();
    assert!((1000.0..1600.0).contains(&dist), "distance {dist}");
    assert!(d["route"].as_array().unwrap().len() >= 2);
    let last = locs.last().unwrap();
    assert_eq!(d["latest"]["coordinates"], last["coordinates"], "{d}");
    assert!(d["latest"]["recorded_at"].as_str().unwrap().ends_with('Z'));
    // Every stop is reached: the ETA says arrived, at the last one.
    assert_eq!((&d["eta"]["arrived"], &d["eta"]["target"]), (&json!(true), &json!("stop")), "{d}");
    assert_eq!(d["eta"]["name"], evil);
    let depot = &d["waypoints"][0];
    assert_eq!(depot["kind"], "stop");
    assert_eq!(depot["name"], "Depot");
    assert!(depot["reached_at"].is_string() && depot["left_at"].is_string(), "{depot}");
    assert!(d["waypoints"][1]["reached_at"].is_string(), "{d}");
    for w in d["waypoints"].as_array().unwrap() {
        assert_eq!(w.as_object().unwrap().len(), 6, "kind, name, coordinates, radius_m, reached_at, left_at: {w}");
    }
    let text = d.to_string();
    for hidden in [&user, &id, &app.project.project_id, &app.project.account_id] {
        assert!(!text.contains(hidden.as_str()), "data shows {hidden}");
    }

    // Ended: not active, and no more polling (openapi.yaml: refresh_seconds is null once ended),
    // in the data and in the page's embedded first data alike.
    app.ok("POST", &format!("/v2/trips/{id}/controls"), app.bearer(), json!({"action": "end"})).await;
    let d = app.get(&format!("/track/{token}/data")).await.json();
    assert_eq!((d["state"].as_str(), d["active"].as_bool()), (Some("ended"), Some(false)), "{d}");
    assert!(d["refresh_seconds"].is_null() && d["ended_at"].is_string(), "{d}");
    let ended = app.get(&format!("/track/{token}")).await.body;
    assert!(ended.contains("\"refresh_seconds\":null") && ended.contains("trip ended, final figures"), "{ended}");

    // Unknown, malformed and look-alike tokens: the same plain 404 page.
    let mut wrong = token.clone();
    wrong.replace_range(31.., if token.ends_with('0') { "1" } else { "0" });
    for bad in [wrong.as_str(), "0123456789abcdef0123456789abcdef", "abc", &token.to_uppercase(), &format!("{token}00")]
    {
        let res = app.get(&format!("/track/{bad}")).await;
        assert_eq!(res.status, StatusCode::NOT_FOUND, "{bad}");
        assert!(res.body.contains("This trip is no longer available") && !res.body.contains("<script"), "{bad}");
        security_headers(&res, "404");
        assert_eq!(res.header("cache-control"), "no-store");
        let res = app.get(&format!("/track/{bad}/data")).await;
        assert_eq!(res.status, StatusCode::NOT_FOUND, "{bad}");
        assert_eq!(res.json(), json!({"error": "not_found"}));
    }

    // Deleting the trip revokes its link.
    let res = app.call("DELETE", &format!("/v2/trips/{id}"), app.bearer(), None).await;
    assert!(res.status.is_success(), "{}", res.body);
    assert_eq!(app.get(&format!("/track/{token}")).await.status, StatusCode::NOT_FOUND);
    assert_eq!(app.get(&format!("/track/{token}/data")).await.status, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread")]
async fn embedded() {
    scenario(App::new(false).await).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn dynamodb() {
    scenario(App::new(true).await).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn v1_link_assets_and_tiles() {
    let cfg = tracking::PageConfig {
        tile_url: Some("https://{s}.tiles.example.org/{z}/{x}/{y}.png".into()),
        tile_attribution: "© <b>Example</b> \"maps\"".into(),
        refresh_seconds: 5,
        stream_url: Some("wss://ws.example.org/prod".into()),
    };
    let app = App::with_router(AppState::new(EmbeddedStore::memory().unwrap()), Some(tracking::router_with(cfg)));
    let body = json!({"origins": [DEPOT], "destinations": [DROP]});
    let trip = app.ok("POST", "/v3/api/trips/", app.secret(), body).await["data"][0].clone();
    let url = trip["trip_tracking_url"].as_str().unwrap();
    let token = url.rsplit('/').next().unwrap();
    assert!(token.len() == 32 && token.bytes().all(|b| b.is_ascii_hexdigit()), "{url}");

    let page = app.get(&format!("/track/{token}")).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.header("content-security-policy").contains("img-src 'self' data: https://*.tiles.example.org;"));
    assert!(page.body.contains("data-tile-url=\"https://{s}.tiles.example.org/{z}/{x}/{y}.png\""));
    assert!(page.body.contains("data-tile-attribution=\"© &lt;b&gt;Example&lt;/b&gt; &quot;maps&quot;\""));
    assert!(page.header("content-security-policy").contains("connect-src 'self' wss://ws.example.org;"));
    assert!(page.body.contains("wm_st_"), "the page's first data carries a stream token");
    let d = app.get(&format!("/track/{token}/data")).await.json();
    assert_eq!(d["refresh_seconds"], 5);
    assert!(d["stream"].is_null(), "a poll mints no token: {d}");
    let d = app.get(&format!("/track/{token}/data?stream=1")).await.json();
    assert_eq!(d["stream"]["url"], "wss://ws.example.org/prod");
    let t = d["stream"]["token"].as_str().unwrap();
    let (p, filter) =
        shared::domain::streams::tokens::authenticate(app.state.store.as_ref(), t).await.unwrap().unwrap();
    assert_eq!(filter.scope, shared::domain::streams::Scope::Trip(trip["id"].as_str().unwrap().into()));
    assert_eq!(p.project_id, app.project.project_id);
    let kinds: Vec<&str> = d["waypoints"].as_array().unwrap().iter().map(|w| w["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["origin", "destination"]);

    for (file, ty) in [
        ("leaflet.js", "text/javascript"),
        ("leaflet.css", "text/css"),
        ("track.js", "text/javascript"),
        ("track.css", "text/css"),
    ] {
        let res = app.get(&format!("/track/assets/{file}")).await;
        assert_eq!(res.status, StatusCode::OK, "{file}");
        assert!(res.header("content-type").starts_with(ty), "{file}");
        assert!(res.header("cache-control").starts_with("public"), "{file}");
        assert_eq!(res.header("x-content-type-options"), "nosniff");
    }
    assert!(app.get("/track/assets/leaflet.js").await.body.contains("Leaflet 1.9.4"));
    assert_eq!(app.get("/track/assets/../Cargo.toml").await.status, StatusCode::NOT_FOUND);
    assert_eq!(app.get("/track/assets/main.rs").await.status, StatusCode::NOT_FOUND);
    // Public: no key needed, and a key changes nothing.
    let with_key = app.call("GET", &format!("/track/{token}/data"), app.secret(), None).await;
    assert_eq!(with_key.status, StatusCode::OK);
}
