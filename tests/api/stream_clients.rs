//! Live streams through Python clients as customers write them (tests/clients/stream_client.py:
//! the `websockets` package for the WebSocket, the standard library for SSE), against the router
//! on a loopback port: a user's locations and geofence events arrive as ingested, in order, with
//! the events API's ids; a dropped connection resumes with nothing missed or repeated; a trip's
//! token opens that trip only and nothing once revoked; a reader that stops reading is closed
//! without slowing ingest. `scripts/python-env.sh` provides the interpreter (`WAYMARK_PYTHON`).
#![allow(clippy::disallowed_methods)] // the test reads its interpreter from the environment

use std::collections::BTreeSet;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

use crate::both;
use crate::geofence_events::{all_events, circle_and_square, crossing_trace, events_on, fix, send, tracked_user};
use crate::helpers::{Key, TestApp};
use crate::streams::serve;
use crate::trips::ts;

const WAIT: Duration = Duration::from_secs(30);

/// A running client: its JSON lines.
struct Client {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Client {
    /// Start `stream_client.py <transport> <args>`.
    fn start(transport: &str, base: &str, args: &[(&str, String)]) -> Self {
        let python = std::env::var("WAYMARK_PYTHON").unwrap_or_else(|_| "python3".into());
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/clients/stream_client.py");
        let mut cmd = Command::new(&python);
        cmd.arg(script).arg(transport).arg("--base").arg(base);
        for (k, v) in args {
            cmd.arg(format!("--{k}"));
            // An empty value is a flag.
            if !v.is_empty() {
                cmd.arg(v);
            }
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("{python} {script}: {e} (source scripts/python-env.sh)"));
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Self { child, lines }
    }

    /// Start and wait until it has subscribed.
    async fn ready(transport: &str, base: &str, args: &[(&str, String)]) -> Self {
        let mut c = Self::start(transport, base, args);
        let first = c.line().await;
        assert_eq!(first, json!({"ready": true}), "{transport} {args:?}");
        c
    }

    async fn line(&mut self) -> Value {
        let l = tokio::time::timeout(WAIT, self.lines.next_line())
            .await
            .expect("a line from the client within the wait")
            .expect("the client's output")
            .unwrap_or_else(|| {
                panic!("the client ended without a line (is websockets installed? scripts/python-env.sh)")
            });
        serde_json::from_str(&l).unwrap_or_else(|e| panic!("{l}: {e}"))
    }

    /// The next `n` messages' bodies.
    async fn messages(&mut self, n: usize) -> Vec<Value> {
        let mut out = Vec::new();
        while out.len() < n {
            let l = self.line().await;
            assert!(l["id"].is_string(), "message {} of {n}: {l}", out.len() + 1);
            assert_eq!(l["id"], l["body"]["id"], "{l}");
            out.push(l["body"].clone());
        }
        out
    }
}

fn ids(bodies: &[Value]) -> Vec<String> {
    bodies.iter().map(|b| b["id"].as_str().unwrap().to_owned()).collect()
}

fn key_of(app: &TestApp) -> (&'static str, String) {
    ("key", app.project.api_key.clone())
}

both!(python_clients_get_a_users_locations_and_geofence_events_in_order_with_the_apis_ids, |app| async move {
    let base = serve(&app).await;
    circle_and_square(&app).await;
    let user = tracked_user(&app).await;
    let other = tracked_user(&app).await;
    let filter = ("filter", json!({"user_id": user}).to_string());
    let mut ws = Client::ready("ws", &base, &[key_of(&app), filter.clone()]).await;
    let mut sse = Client::ready("sse", &base, &[key_of(&app), filter]).await;
    let fixes = crossing_trace(21);
    let (head, tail) = fixes.split_at(fixes.len() / 2);
    send(&app, &other, &fixes[..3]).await; // another user's: on neither stream
    send(&app, &user, head).await;
    send(&app, &user, tail).await;

    let events = all_events(&app, &format!("user_id={user}")).await;
    assert_eq!(events.len(), 4, "two entries and two exits: {events:?}");
    let api: BTreeSet<String> = events.iter().map(|e| e["id"].as_str().unwrap().to_owned()).collect();
    // The fence events and one location.updated per batch.
    let by_ws = ws.messages(api.len() + 2).await;
    let by_sse = sse.messages(api.len() + 2).await;
    assert_eq!(by_ws, by_sse, "both transports carry the same bodies");
    let got = ids(&by_ws);
    assert!(got.windows(2).all(|w| w[0] < w[1]), "in event order: {got:?}");
    let fences: BTreeSet<String> = by_ws
        .iter()
        .filter(|b| b["type"] != "location.updated")
        .map(|b| b["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(fences, api, "the events API's ids");
    assert!(by_ws.iter().all(|b| b["data"]["user"]["user_id"] == user.as_str()));
});

both!(a_python_client_resumes_after_a_dropped_connection_with_nothing_missed_or_repeated, |app| async move {
    let base = serve(&app).await;
    circle_and_square(&app).await;
    let user = tracked_user(&app).await;
    let fixes = crossing_trace(22);
    let thirds: Vec<&[Value]> = fixes.chunks(fixes.len().div_ceil(3)).collect();
    let filter = ("filter", json!({"user_id": user}).to_string());

    // The WebSocket client takes one message and goes; the next batch is sent while it is away.
    let mut first = Client::ready("ws", &base, &[key_of(&app), filter.clone(), ("count", "1".into())]).await;
    send(&app, &user, thirds[0]).await;
    let mut seen = first.messages(1).await;
    first.child.wait().await.unwrap();
    send(&app, &user, thirds[1]).await;
    let last = seen.last().unwrap()["id"].as_str().unwrap().to_owned();
    let mut ws = Client::ready("ws", &base, &[key_of(&app), filter.clone(), ("since", last.clone())]).await;
    let mut sse = Client::ready("sse", &base, &[key_of(&app), filter.clone(), ("since", last)]).await;
    send(&app, &user, thirds[2]).await; // live after the resume

    let fence_events = all_events(&app, &format!("user_id={user}")).await.len();
    let zero = ("since", "0".repeat(24));
    let everything = Client::ready("ws", &base, &[key_of(&app), filter, zero]).await.messages(3 + fence_events).await;
    let n = everything.len() - seen.len();
    let by_sse = sse.messages(n).await;
    seen.extend(ws.messages(n).await);
    assert_eq!(ids(&seen), ids(&everything), "resumed: nothing missed, nothing twice, in order");
    assert_eq!(by_sse, everything[everything.len() - n..], "SSE resumed the same");
});

both!(a_trip_token_opens_its_own_trip_only_and_nothing_once_revoked, |app| async move {
    let base = serve(&app).await;
    let user = tracked_user(&app).await;
    let t1 = trip_in(&app, Key::Secret, &user).await;
    let t2 = trip_in(&app, Key::Secret, &user).await;
    let other = app.other_project().await;
    let (status, res) = app
        .call("POST", "/v1/api/user/", Key::Raw(&other.api_key), Some(&json!({"app_type": 1, "device_token": "t"})))
        .await;
    assert_eq!(status.as_u16(), 201, "{res}");
    let t3 = trip_in(&app, Key::Raw(&other.api_key), res["data"]["user_id"].as_str().unwrap()).await;
    let (status, res) = app.call("POST", "/v1/api/streams/tokens/", Key::Secret, Some(&json!({"trip_id": t1}))).await;
    assert_eq!(status.as_u16(), 201, "{res}");
    let token = ("token", res["data"]["token"].as_str().unwrap().to_owned());
    let token_id = res["data"]["token_id"].as_str().unwrap().to_owned();

    for (filter, why) in [(json!({"trip_id": t2}), "another trip"), (json!({"trip_id": t3}), "another project's trip")]
    {
        let mut c = Client::start("ws", &base, &[token.clone(), ("filter", filter.to_string())]);
        let l = c.line().await;
        assert_eq!(l["error"]["status"], 403, "{why}: {l}");
        assert!(l["error"]["message"].as_str().unwrap().starts_with("filter.trip_id"), "{why}: {l}");
    }
    // Its own trip, named or not.
    Client::ready("ws", &base, &[token.clone(), ("filter", json!({"trip_id": t1}).to_string())]).await;
    let mut open = Client::ready("ws", &base, std::slice::from_ref(&token)).await;
    send(&app, &user, &[fix((13.4, 52.5), 0)]).await;
    assert_eq!(open.messages(1).await[0]["type"], "location.updated");

    let (status, res) =
        app.call("DELETE", &format!("/v1/api/streams/tokens/?token_id={token_id}"), Key::Secret, None).await;
    assert_eq!(status.as_u16(), 200, "{res}");
    let l = Client::start("ws", &base, std::slice::from_ref(&token)).line().await;
    assert_eq!(l["error"]["status"], 401, "a revoked token opens nothing: {l}");
    // The open subscription closes at its next message.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    send(&app, &user, &[fix((13.4, 52.5), 60)]).await;
    let l = open.line().await;
    assert_eq!(l["closed"]["reason"], "revoked", "{l}");
});

async fn trip_in(app: &TestApp, key: Key<'_>, user: &str) -> String {
    let (status, res) = app.call("POST", "/v3/api/trips/", key, Some(&json!({"user_id": user}))).await;
    assert_eq!(status.as_u16(), 201, "{res}");
    res["data"][0]["id"].as_str().expect("trip id").to_owned()
}

both!(a_python_client_that_stops_reading_is_closed_without_slowing_ingest, |app| async move {
    let base = serve(&app).await;
    // Messages of 4 KB (the user's metadata rides in each), so that socket buffers of a few MB
    // hold few of them.
    let blob: String = "x".repeat(490);
    let metadata: serde_json::Map<String, Value> = (0..8).map(|i| (format!("k{i}"), json!(blob))).collect();
    let user = app.create_user(Value::Object(metadata)).await;
    events_on(&app, Key::Secret, &user).await;
    let filter = ("filter", json!({"user_id": user}).to_string());
    let mut stuck = Client::ready("ws", &base, &[key_of(&app), filter.clone(), ("stuck", String::new())]).await;
    let mut fast = Client::ready("ws", &base, &[key_of(&app), filter]).await;
    // More than the hub's queue, the connection's queue and the socket buffers hold.
    const N: usize = shared::domain::streams::hub::QUEUE + 600;
    let reader = tokio::spawn(async move { fast.messages(N).await.len() });
    let mut took = Vec::with_capacity(N);
    for i in 0..N {
        let t = Instant::now();
        send(&app, &user, &[fix((10.0, 50.0 + i as f64 * 1e-4), i as i64)]).await;
        took.push(t.elapsed());
    }
    assert_eq!(tokio::time::timeout(WAIT, reader).await.expect("the fast reader kept up").unwrap(), N);
    // An ingest held up by the stuck reader would wait until it reads (never, here); a loaded
    // machine's DynamoDB Local has pauses of about a second.
    took.sort();
    let (median, slowest) = (took[N / 2], took[N - 1]);
    assert!(
        median < Duration::from_millis(250) && slowest < Duration::from_secs(5),
        "ingest took {median:?} (median), {slowest:?} (slowest)"
    );
    // Reading at last, the stuck client finds the reason and where to resume after what it got.
    stuck.child.stdin.as_mut().unwrap().write_all(b"read\n").await.unwrap();
    let mut read = 0;
    let closed = loop {
        let l = stuck.line().await;
        if !l["closed"].is_null() {
            break l["closed"].clone();
        }
        assert!(l["id"].is_string(), "after {read} messages: {l}");
        read += 1;
    };
    assert_eq!(closed["reason"], "lagging", "{closed}");
    assert!(closed["last_event_id"].is_string(), "{closed}");
});

/// A fix at `p` recorded `ms` milliseconds from now.
fn fix_now(p: (f64, f64), ms: i64) -> Value {
    let t = chrono::Utc::now() + chrono::Duration::milliseconds(ms);
    json!({"coordinates": [p.0, p.1], "recorded_at": ts(t), "accuracy": 5.0})
}

async fn control(app: &TestApp, trip: &str, action: &str, extra: Value) {
    let mut body = json!({"trip_id": trip, "action": action});
    body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    let (status, res) = app.call("POST", "/v1/api/trips/controls/", Key::Secret, Some(&body)).await;
    assert_eq!(status.as_u16(), 200, "{res}");
}

both!(a_trip_control_keeps_its_place_among_the_users_fixes_whatever_their_arrival_order, |app| async move {
    let base = serve(&app).await;
    let user = tracked_user(&app).await;
    let p = (13.40, 52.52);
    // The trip is made (in the user's sequence) before anything is subscribed.
    let trip = trip_in(&app, Key::Secret, &user).await;
    tokio::time::sleep(Duration::from_millis(1600)).await;
    let user_filter = ("filter", json!({"user_id": user}).to_string());
    let trip_filter = ("filter", json!({"trip_id": trip}).to_string());
    let mut ws = Client::ready("ws", &base, &[key_of(&app), user_filter.clone()]).await;
    let mut sse = Client::ready("sse", &base, &[key_of(&app), user_filter.clone()]).await;
    let mut by_trip = Client::ready("ws", &base, &[key_of(&app), trip_filter]).await;

    // As an SDK sends them: a fix, the start, then a batch with a fix recorded before the start
    // and one after it.
    send(&app, &user, &[fix_now(p, -1500)]).await;
    control(&app, &trip, "start", json!({})).await;
    send(&app, &user, &[fix_now(p, -700), fix_now(p, 500)]).await;
    control(&app, &trip, "pause", json!({})).await;
    send(&app, &user, &[fix_now(p, -100), fix_now(p, 900)]).await;

    // location.updated, trip.started, location.updated (of the fix after the start: the one
    // before it is late and fires nothing), trip.paused, location.updated.
    let live = ws.messages(5).await;
    let kinds: Vec<&str> = live.iter().map(|b| b["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["location.updated", "trip.started", "location.updated", "trip.paused", "location.updated"],
        "{live:?}"
    );
    let live_ids = ids(&live);
    assert!(live_ids.windows(2).all(|w| w[0] < w[1]), "delivered in id order: {live_ids:?}");
    assert_eq!(ids(&sse.messages(5).await), live_ids, "SSE: the same, in the same order");
    let trip_ids = ids(&by_trip.messages(5).await);
    assert!(trip_ids.windows(2).all(|w| w[0] < w[1]), "the trip's stream in id order: {trip_ids:?}");

    // Resumed after any message, each transport sends exactly the rest (the stored ones from
    // before the subscription first: the trip's creation).
    let mut all = Client::ready("ws", &base, &[key_of(&app), user_filter.clone(), ("since", "0".repeat(24))]).await;
    let stored = all.messages(6).await;
    assert_eq!(stored[0]["type"], "trip.created", "{stored:?}");
    assert_eq!(ids(&stored[1..]), live_ids, "stored in the order delivered");
    for (i, after) in live_ids.iter().enumerate().take(live_ids.len() - 1) {
        let rest = &live_ids[i + 1..];
        for transport in ["ws", "sse"] {
            let args = [key_of(&app), user_filter.clone(), ("since", after.clone()), ("count", rest.len().to_string())];
            let mut c = Client::ready(transport, &base, &args).await;
            let got = c.messages(rest.len()).await;
            assert_eq!(ids(&got), rest, "{transport} resumed after message {}: {got:?} (live {live:?})", i + 1);
        }
    }
    // The events list agrees: the late fix is stored and listed with the user's history.
    let (_, hist) = app.get(&format!("/v1/api/location/?user_id={user}")).await;
    assert_eq!(hist["data"]["count"].as_u64().or(hist["data"]["total"].as_u64()).unwrap_or(5), 5, "{hist}");
});

both!(a_start_dated_back_goes_just_after_the_users_fixes_already_out, |app| async move {
    let user = tracked_user(&app).await;
    let p = (13.40, 52.52);
    // Whole milliseconds, as fixes are stored.
    let fix_at =
        chrono::DateTime::from_timestamp_millis((chrono::Utc::now() - chrono::Duration::minutes(2)).timestamp_millis())
            .unwrap();
    send(&app, &user, &[json!({"coordinates": [p.0, p.1], "recorded_at": ts(fix_at), "accuracy": 5.0})]).await;
    let trip = trip_in(&app, Key::Secret, &user).await;
    let day = chrono::Utc::now().date_naive();
    let days = format!("start_date={}&end_date={}", day - chrono::Duration::days(1), day + chrono::Duration::days(1));
    let events = |trip: String| {
        let (app, days, user) = (&app, days.clone(), user.clone());
        async move {
            let (_, ev) = app.get(&format!("/v1/api/event/trips/?user_id={user}&trip_id={trip}&{days}")).await;
            let list = ev["data"]["events"].as_array().or(ev["data"].as_array()).cloned().unwrap_or_default();
            let time = |ty: &str| {
                let id = list.iter().find(|e| e["event_type"] == ty).and_then(|e| e["id"].as_str());
                shared::ids::time_of(id.unwrap_or_else(|| panic!("no {ty}: {ev}"))).unwrap()
            };
            (time("service:trip:created"), time("trip:started"))
        }
    };
    // The fix's messages are out; a start dated ten minutes back goes just after them, not
    // before what subscribers have already received (the trip's creation takes the clock's id
    // and is not in the user's sequence: docs/streams.md).
    let ten_ago = chrono::Utc::now() - chrono::Duration::minutes(10);
    control(&app, &trip, "start", json!({"started_at": ts(ten_ago)})).await;
    let (_, started) = events(trip.clone()).await;
    assert_eq!((started - fix_at).num_milliseconds(), 1, "just after the fix: {started} vs {fix_at}");
    // The trip keeps the time it was given.
    let (_, got) = app.get(&format!("/v1/api/trips/?trip_id={trip}")).await;
    assert_eq!(got["data"][0]["trip_started_at"], json!(ts(ten_ago)), "{got}");
});
