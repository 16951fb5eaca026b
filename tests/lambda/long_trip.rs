//! A 24-hour trip at one fix a second (86,400 fixes) through the Lambda path: the fixes sent as
//! API Gateway events to the locations function, the summary asked for with the trips function's
//! event (`Accept-Encoding: gzip`, as python-requests, OkHttp, URLSession, Node's fetch and Dart's
//! HttpClient send by default), the answer converted as the runtime converts it
//! (`shared::lambda::Answer`, then the API Gateway response JSON whose size Lambda limits to 6 MB),
//! and read back: the same document the plain answer is. A client that does not accept gzip gets
//! the plain document where it fits; on Lambda, where it does not, a 406 saying why.

use std::io::Read;
use std::time::Instant;

use axum::Router;
use axum::http::StatusCode;
use chrono::{DateTime, Duration, Utc};
use lambda_http::aws_lambda_events::apigw::ApiGatewayV2httpResponse;
use lambda_http::{Body, IntoResponse as _};
use serde_json::{Value, json};
use shared::AppState;
use shared::domain::projects::{self, ChosenKeys};
use shared::store::EmbeddedStore;
use tower::ServiceExt;

use crate::gps_truth::{Outliers, Timeline, city_route, sample};
use crate::support::{event_with, function_of_event};

/// What Lambda lets a function answer (synchronous invocation, response payload).
const LAMBDA_RESPONSE_LIMIT: usize = 6 * 1024 * 1024;

const FIXES: usize = 86_400;

/// A day on the road: city drives at a fix a second, with halts and stops between rounds.
fn day(t0: DateTime<Utc>) -> Vec<Value> {
    let mut tl = Timeline::new(t0, (13.3777, 52.5163), 34.0);
    let mut round = 0.0;
    while tl.states.len() < FIXES {
        let route: Vec<(f64, f64)> = city_route(1.0).iter().map(|&(x, y)| (x + round * 300.0, y)).collect();
        for (k, chunk) in route.chunks(route.len().div_ceil(4)).enumerate() {
            tl.travel(chunk, 12.0, 34.0 + 10.0 * k as f64, [3.0, 6.0, 10.0, 15.0][k], false);
            tl.stay(40, 10.0);
        }
        tl.stay(300, 35.0);
        round += 1.0;
    }
    tl.states.truncate(FIXES);
    sample(&tl, 1, Outliers::Optimistic, 7).into_iter().map(|s| s.json).collect()
}

/// The API Gateway response JSON the runtime sends for `res`, as lambda_http builds it for an
/// HTTP API (payload 2.0): a binary body goes base64-encoded.
fn api_gateway_response(res: &lambda_http::Response<Body>) -> Vec<u8> {
    let mut out = ApiGatewayV2httpResponse::default();
    out.status_code = i64::from(res.status().as_u16());
    out.headers = res.headers().clone();
    out.is_base64_encoded = matches!(res.body(), Body::Binary(_));
    out.body = Some(res.body().clone());
    serde_json::to_vec(&out).expect("response JSON")
}

fn bytes(body: &Body) -> &[u8] {
    match body {
        Body::Text(t) => t.as_bytes(),
        Body::Binary(b) => b,
        Body::Empty => b"",
        _ => panic!("unexpected body kind"),
    }
}

/// Feed an event to a function as the Lambda runtime does (`shared::lambda::handler`, what
/// `shared::lambda::run` serves), and convert its answer as the runtime does.
async fn invoke(router: &Router<AppState>, state: &AppState, event: &str) -> lambda_http::Response<Body> {
    let req = lambda_http::request::from_str(event).expect("lambda_http parses the event");
    let answer = shared::lambda::handler(router.clone(), state.clone()).oneshot(req).await.expect("infallible");
    answer.into_response().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_at_one_fix_a_second_reads_through_the_lambda_path() {
    let state = AppState::new(EmbeddedStore::memory().expect("store"));
    let issued = projects::create(state.store.as_ref(), "long", &ChosenKeys::default()).await.expect("project");
    let router_of = |event: &str| (function_of_event(event).router)();
    let (users, locations, trips) =
        (router_of("users-create"), router_of("locations-ingest"), router_of("trips-v1-summary"));
    let key = issued.api_key.as_str();
    let json_of = |res: &lambda_http::Response<Body>| -> Value {
        serde_json::from_slice(bytes(res.body())).unwrap_or_else(|_| panic!("JSON answer ({})", res.status()))
    };

    let res = invoke(&users, &state, &event_with("users-create", &[("REPLACE_API_KEY", key)])).await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let user = json_of(&res)["data"]["user_id"].as_str().expect("user_id").to_owned();
    fn placeholders<'a>(key: &'a str, user: &'a str, trip: &'a str) -> [(&'static str, &'a str); 3] {
        [("REPLACE_API_KEY", key), ("REPLACE_USER_ID", user), ("REPLACE_TRIP_ID", trip)]
    }
    let values = |trip| placeholders(key, &user, trip);

    // A v1 trip, started a whole day and an hour ago; its fixes, 1,000 to an event.
    let res = invoke(&trips, &state, &event_with("trips-v1-create", &values(""))).await;
    assert_eq!(res.status(), StatusCode::CREATED, "{}", String::from_utf8_lossy(bytes(res.body())));
    let trip = json_of(&res)["data"][0]["id"].as_str().expect("trip id").to_owned();
    let t0 = DateTime::from_timestamp((Utc::now() - Duration::seconds(FIXES as i64 + 3600)).timestamp(), 0).unwrap();
    let at = |t: DateTime<Utc>| t.format("%Y-%m-%dT%H:%M:%S%.3f").to_string();
    let control = |action: &str, when: DateTime<Utc>| {
        let mut e: Value = serde_json::from_str(&event_with("trips-v1-controls", &values(&trip))).expect("event");
        e["body"] = json!(json!({"trip_id": trip, "action": action, format!("{action}ed_at"): at(when)}).to_string());
        e.to_string()
    };
    let res = invoke(&trips, &state, &control("start", t0)).await;
    assert_eq!(res.status(), StatusCode::OK, "{}", String::from_utf8_lossy(bytes(res.body())));
    let fixes = day(t0);
    assert_eq!(fixes.len(), FIXES);
    let ingest: Value = serde_json::from_str(&event_with("locations-ingest", &values(&trip))).expect("event");
    for batch in fixes.chunks(shared::domain::locations::MAX_BATCH) {
        let mut e = ingest.clone();
        e["body"] = json!(json!({"user_id": user, "locations": batch}).to_string());
        let res = invoke(&locations, &state, &e.to_string()).await;
        assert_eq!(res.status(), StatusCode::CREATED, "{}", String::from_utf8_lossy(bytes(res.body())));
    }
    let res = invoke(&trips, &state, &control("end", t0 + Duration::seconds(FIXES as i64))).await;
    assert_eq!(res.status(), StatusCode::OK, "{}", String::from_utf8_lossy(bytes(res.body())));

    // The summary, as the event asks for it (gzip accepted).
    let event = event_with("trips-v1-summary", &values(&trip));
    let started = Instant::now();
    let res = invoke(&trips, &state, &event).await;
    let took = started.elapsed();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.headers()["content-encoding"], "gzip");
    let payload = api_gateway_response(&res);
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(bytes(res.body())).read_to_end(&mut plain).expect("gzip");
    let doc: Value = serde_json::from_slice(&plain).expect("the summary as JSON");
    let route = doc["data"]["route"].as_array().expect("route");
    eprintln!(
        "summary of {FIXES} fixes via the Lambda path: {} route points, {} bytes of JSON, {} gzipped, \
         {} bytes of API Gateway response (limit {LAMBDA_RESPONSE_LIMIT}); {} ms (debug build)",
        route.len(),
        plain.len(),
        bytes(res.body()).len(),
        payload.len(),
        took.as_millis()
    );
    assert!(plain.len() > LAMBDA_RESPONSE_LIMIT, "the plain summary would not fit: {} bytes", plain.len());
    assert!(payload.len() < LAMBDA_RESPONSE_LIMIT, "the response Lambda sends: {} bytes", payload.len());
    assert!(route.len() > FIXES / 2, "the route is the trip's, not a sketch: {} points", route.len());
    assert_eq!(doc["code"], 200);

    // Without gzip: the plain document, the same one, where nothing limits the answer (`waymark
    // serve`); through the Lambda adapter, a 406 naming the way out instead of Lambda's own
    // failure (which API Gateway turns into an opaque 502).
    let mut no_gzip: Value = serde_json::from_str(&event).expect("event");
    no_gzip["headers"].as_object_mut().expect("headers").remove("accept-encoding");
    let req = lambda_http::request::from_str(&no_gzip.to_string()).expect("event");
    let local = shared::http::service(trips.clone(), state.clone()).oneshot(req).await.expect("infallible");
    let local = axum::body::to_bytes(local.into_body(), usize::MAX).await.expect("body");
    assert_eq!(local.as_ref(), plain.as_slice(), "the same document, plain");
    let res = invoke(&trips, &state, &no_gzip.to_string()).await;
    assert_eq!(res.status(), StatusCode::NOT_ACCEPTABLE);
    let body = json_of(&res);
    assert_eq!((&body["status"], &body["code"]), (&json!(false), &json!(406)), "{body}");
    assert!(body["msg"].as_str().unwrap_or("").contains("Accept-Encoding: gzip"), "{body}");
    assert!(api_gateway_response(&res).len() < 1000);
}
