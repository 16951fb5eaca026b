//! Live streams over real HTTP (`waymark serve`'s router on a loopback port): a user's locations
//! and geofence events arrive as they are ingested, in id order, with the ids of the events API
//! and the bodies of webhooks; a dropped connection resumes with `Last-Event-ID` with nothing
//! missed or repeated; resume ids past retention, bad filters and other projects are refused; a
//! reader that stops reading is closed without holding up ingest or other readers.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::both;
use crate::geofence_events::{all_events, circle_and_square, crossing_trace, fix, send, tracked_user};
use crate::helpers::{Backend, TestApp};

const PATH: &str = "/v1/api/streams/sse/";
const WAIT: Duration = Duration::from_secs(30);

/// The app's router served on a loopback port; the base URL.
pub(crate) async fn serve(app: &TestApp) -> String {
    serve_on(app, tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("port")).await
}

async fn serve_on(app: &TestApp, listener: tokio::net::TcpListener) -> String {
    let addr = listener.local_addr().unwrap();
    let router = app.router.clone();
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{addr}")
}

/// A plain-HTTP client (reqwest is built here without a default TLS provider).
pub(crate) fn client() -> reqwest::Client {
    let tls = shared::tls::rustls_config().expect("tls");
    reqwest::Client::builder().tls_backend_preconfigured(tls).build().expect("client")
}

#[derive(Debug, Clone)]
pub(crate) struct SseEvent {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: String,
}

/// An SSE client: reads the body chunk by chunk and splits it into events.
pub(crate) struct Sse {
    res: reqwest::Response,
    buf: String,
}

impl Sse {
    /// Open a stream (`query` without the `?`); panics unless it answers 200 and says it has
    /// subscribed.
    pub async fn open(base: &str, key: &str, query: &str, last_id: Option<&str>) -> Self {
        let (status, res) = Self::request(base, key, query, last_id).await;
        assert_eq!(status, StatusCode::OK, "{query}");
        let mut s = Self { res: res.unwrap(), buf: String::new() };
        let first = s.raw_block().await.expect("a first frame");
        assert!(first.contains(": subscribed"), "{first}");
        s
    }

    /// The answer of a stream request: its status, and the response when 200, or the JSON error.
    pub async fn request(
        base: &str,
        key: &str,
        query: &str,
        last_id: Option<&str>,
    ) -> (StatusCode, Result<reqwest::Response, Value>) {
        let mut req = client().get(format!("{base}{PATH}?{query}"));
        // No key: a stream token in the query instead.
        if !key.is_empty() {
            req = req.header("Api-Key", key);
        }
        if let Some(id) = last_id {
            req = req.header("Last-Event-ID", id);
        }
        let res = req.send().await.expect("request");
        let status = StatusCode::from_u16(res.status().as_u16()).unwrap();
        if status == StatusCode::OK {
            assert_eq!(res.headers()["content-type"], "text/event-stream");
            return (status, Ok(res));
        }
        (status, Err(serde_json::from_slice(&res.bytes().await.expect("body")).expect("a JSON error")))
    }

    async fn raw_block(&mut self) -> Option<String> {
        loop {
            if let Some(i) = self.buf.find("\n\n") {
                let block = self.buf[..i].to_owned();
                self.buf.drain(..i + 2);
                return Some(block);
            }
            match tokio::time::timeout(WAIT, self.res.chunk()).await {
                Ok(Ok(Some(c))) => self.buf.push_str(std::str::from_utf8(&c).expect("utf-8")),
                Ok(Ok(None)) | Ok(Err(_)) => return None,
                Err(_) => panic!("no frame within {WAIT:?}; have {:?}", self.buf),
            }
        }
    }

    /// The next event (comments, keep-alives, are skipped); None at the end of the stream.
    pub async fn next(&mut self) -> Option<SseEvent> {
        loop {
            let block = self.raw_block().await?;
            let mut e = SseEvent { id: None, event: None, data: String::new() };
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("id:") {
                    e.id = Some(v.trim().to_owned());
                } else if let Some(v) = line.strip_prefix("event:") {
                    e.event = Some(v.trim().to_owned());
                } else if let Some(v) = line.strip_prefix("data:") {
                    e.data.push_str(v.strip_prefix(' ').unwrap_or(v));
                }
            }
            if !e.data.is_empty() {
                return Some(e);
            }
        }
    }

    /// The next `n` messages (bodies) within [`WAIT`]; each event's SSE id is its body's id.
    pub async fn take(&mut self, n: usize) -> Vec<Value> {
        let mut out = Vec::new();
        let deadline = tokio::time::Instant::now() + WAIT;
        while out.len() < n {
            let e = tokio::time::timeout_at(deadline, self.next())
                .await
                .unwrap_or_else(|_| panic!("{} of {n} messages within {WAIT:?}: {:?}", out.len(), ids(&out)))
                .unwrap_or_else(|| panic!("the stream ended after {:?}", ids(&out)));
            assert_eq!(e.event, None, "{e:?}");
            let body: Value = serde_json::from_str(&e.data).unwrap();
            assert_eq!(e.id.as_deref(), body["id"].as_str(), "{e:?}");
            out.push(body);
        }
        out
    }
}

fn ids(bodies: &[Value]) -> Vec<String> {
    bodies.iter().map(|b| b["id"].as_str().unwrap().to_owned()).collect()
}

fn is_sorted(v: &[String]) -> bool {
    v.windows(2).all(|w| w[0] < w[1])
}

both!(a_users_locations_and_geofence_events_arrive_as_ingested_with_the_events_apis_ids, |app| async move {
    let base = serve(&app).await;
    let key = app.project.api_key.clone();
    circle_and_square(&app).await;
    let user = tracked_user(&app).await;
    let other_user = tracked_user(&app).await;
    let mut s = Sse::open(&base, &key, &format!("user_id={user}"), None).await;
    let mut fences = Sse::open(&base, &key, &format!("user_id={user}&events=geofence.entry,geofence.exit"), None).await;
    let fixes = crossing_trace(11);
    let (head, tail) = fixes.split_at(fixes.len() / 2);
    send(&app, &other_user, &fixes[..3]).await; // another user's: not on this stream
    send(&app, &user, head).await;
    send(&app, &user, tail).await;
    send(&app, &user, tail).await; // a re-sent batch causes nothing

    let events = all_events(&app, &format!("user_id={user}")).await;
    assert_eq!(events.len(), 4, "two entries and two exits: {events:?}");
    let api_ids: BTreeSet<String> = events.iter().map(|e| e["id"].as_str().unwrap().to_owned()).collect();
    // The fence events and one location.updated per batch that stored something.
    let got = s.take(api_ids.len() + 2).await;
    let got_ids = ids(&got);
    assert!(is_sorted(&got_ids), "in event order: {got_ids:?}");
    let kinds: Vec<&str> = got.iter().map(|b| b["type"].as_str().unwrap()).collect();
    assert_eq!(kinds.iter().filter(|k| **k == "location.updated").count(), 2, "{kinds:?}");
    let fence_ids: BTreeSet<String> =
        got.iter().filter(|b| b["type"] != "location.updated").map(|b| b["id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(fence_ids, api_ids, "the events API's ids");
    for b in &got {
        assert_eq!(b["project_id"], app.project.project_id.as_str());
        assert_eq!(b["data"]["user"]["user_id"], user.as_str(), "{b}");
    }
    let only_fences = fences.take(4).await;
    assert_eq!(ids(&only_fences).into_iter().collect::<BTreeSet<_>>(), api_ids);

    // The stored messages agree: a stream resumed from the start sends the same, in the same order.
    let mut again = Sse::open(&base, &key, &format!("user_id={user}&since={}", "0".repeat(24)), None).await;
    assert_eq!(again.take(got.len()).await, got, "the same bodies, byte for byte");
});

both!(a_dropped_stream_resumes_from_its_last_id_with_nothing_missed_or_repeated, |app| async move {
    let base = serve(&app).await;
    let key = app.project.api_key.clone();
    circle_and_square(&app).await;
    let user = tracked_user(&app).await;
    let fixes = crossing_trace(12);
    let thirds: Vec<&[Value]> = fixes.chunks(fixes.len().div_ceil(3)).collect();
    let q = format!("user_id={user}");

    let mut s = Sse::open(&base, &key, &q, None).await;
    send(&app, &user, thirds[0]).await;
    let first = s.take(1).await; // at least the batch's location.updated
    let mut seen = first.clone();
    drop(s); // the connection drops
    send(&app, &user, thirds[1]).await; // missed while away
    let last = seen.last().unwrap()["id"].as_str().unwrap().to_owned();
    let mut s = Sse::open(&base, &key, &q, Some(&last)).await;
    send(&app, &user, thirds[2]).await; // live after the resume

    // Everything stored for the user, from a stream resumed at the start.
    let mut all = Sse::open(&base, &key, &format!("{q}&since={}", "0".repeat(24)), None).await;
    let mut everything = Vec::new();
    // Three batches: three location.updated and the fence events of the whole trace.
    let fence_events = all_events(&app, &q).await.len();
    everything.extend(all.take(3 + fence_events).await);
    let rest = s.take(everything.len() - seen.len()).await;
    seen.extend(rest);
    assert_eq!(ids(&seen), ids(&everything), "resumed: nothing missed, nothing twice, in order");
    assert!(is_sorted(&ids(&seen)));
});

both!(a_stream_refuses_bad_filters_old_resume_ids_and_other_projects, |app| async move {
    let base = serve(&app).await;
    let key = app.project.api_key.clone();
    let user = tracked_user(&app).await;
    for (query, last, status, field) in [
        ("events=geofence.entry,nope", None, StatusCode::BAD_REQUEST, "events[1]"),
        ("user_id=a&trip_id=b", None, StatusCode::BAD_REQUEST, "trip_id"),
        ("color=red", None, StatusCode::BAD_REQUEST, "color"),
        ("user_id=nobody", None, StatusCode::BAD_REQUEST, "user_id"),
        ("trip_id=nothing", None, StatusCode::BAD_REQUEST, "trip_id"),
        ("user_id=bbbbbbbbbbbbbbbbbbbbbbbb", None, StatusCode::NOT_FOUND, "user_id"),
        ("group_id=nogroup", None, StatusCode::NOT_FOUND, "group_id"),
        ("trip_id=aaaaaaaaaaaaaaaaaaaaaaaa", None, StatusCode::NOT_FOUND, "trip_id"),
        ("", Some("not-an-id"), StatusCode::BAD_REQUEST, "Last-Event-ID"),
        ("since=123", None, StatusCode::BAD_REQUEST, "since"),
    ] {
        let (got, res) = Sse::request(&base, &key, query, last).await;
        let err = res.err().unwrap_or_else(|| panic!("{query}: answered 200"));
        assert_eq!(got, status, "{query}: {err}");
        assert!(err["msg"].as_str().unwrap().starts_with(field), "{query}: {err}");
    }
    let (got, _) = Sse::request(&base, &app.project.publishable_key, "", None).await;
    assert_eq!(got, StatusCode::FORBIDDEN);
    let (got, _) = Sse::request(&base, "wrong", "", None).await;
    assert_eq!(got, StatusCode::UNAUTHORIZED);

    // Past retention: 410 with a message that says what to do, not a silent stream.
    let (status, res) = app
        .call("PUT", "/v1/api/project/settings/", crate::helpers::Key::Secret, Some(&json!({"retention_days": 7})))
        .await;
    assert_eq!(status, StatusCode::OK, "{res}");
    let old = shared::ids::id_at(chrono::Utc::now() - chrono::Duration::days(8), 0);
    let (got, res) = Sse::request(&base, &key, &format!("user_id={user}"), Some(&old)).await;
    let err = res.err().unwrap();
    assert_eq!(got, StatusCode::GONE, "{err}");
    assert!(err["msg"].as_str().unwrap().contains("retention of 7 days"), "{err}");
    let recent = shared::ids::id_at(chrono::Utc::now() - chrono::Duration::days(6), 0);
    Sse::open(&base, &key, &format!("user_id={user}"), Some(&recent)).await;

    // Another project: our user is unknown to it, and its project stream carries none of ours.
    let other = app.other_project().await;
    let (got, _) = Sse::request(&base, &other.api_key, &format!("user_id={user}"), None).await;
    assert_eq!(got, StatusCode::NOT_FOUND);
    let mut theirs = Sse::open(&base, &other.api_key, "", None).await;
    let mut ours = Sse::open(&base, &key, "", None).await;
    // Recorded now: within the retention just set.
    let now = shared::time::Timestamp::now().format(None);
    send(&app, &user, &[json!({"coordinates": [10.0, 50.0], "recorded_at": now, "accuracy": 5.0})]).await;
    assert_eq!(ours.take(1).await[0]["data"]["user"]["user_id"], user.as_str());
    let quiet = tokio::time::timeout(Duration::from_millis(500), theirs.next()).await;
    assert!(quiet.is_err(), "another project's stream got {quiet:?}");
});

/// A reader that stops reading falls behind and is closed with a reason; ingest and a reader
/// that keeps up are not held up. Embedded store only: the queue is the process's, whichever
/// store feeds it, and the test ingests more than a queue's worth of batches.
#[tokio::test]
async fn a_slow_reader_is_closed_with_a_reason_without_slowing_ingest_or_others() {
    let app = TestApp::new(Backend::Embedded).await;
    // Small fixed socket buffers on the server (accepted sockets inherit them), so a reader that
    // stops reading stops the server's writes soon, as on a real network, rather than after the
    // megabytes that loopback autotuning allows.
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.set_send_buffer_size(8192).unwrap();
    sock.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let base = serve_on(&app, sock.listen(128).unwrap()).await;
    let key = app.project.api_key.clone();
    // Messages of about 4 KB (each carries the user's metadata), so that a queue's worth is far
    // more than the socket buffers and hyper's write buffer hold (about 650 KB here).
    let user = app.create_user(json!({"notes": "x".repeat(3900)})).await;
    let q = format!("user_id={user}");
    // A reader with a tiny receive window that reads nothing after the first frame.
    let addr = base.strip_prefix("http://").unwrap().parse().unwrap();
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(2048).unwrap();
    let mut stuck = sock.connect(addr).await.unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let req = format!("GET {PATH}?{q} HTTP/1.1\r\nHost: x\r\nApi-Key: {key}\r\n\r\n");
    stuck.write_all(req.as_bytes()).await.unwrap();
    let mut head = [0u8; 512];
    let n = stuck.read(&mut head).await.unwrap();
    assert!(std::str::from_utf8(&head[..n]).unwrap().starts_with("HTTP/1.1 200"));
    let mut fast = Sse::open(&base, &key, &q, None).await;
    // Message by message: each within WAIT, the whole run as long as ingest takes.
    let reader = tokio::spawn(async move {
        let mut got = Vec::new();
        for _ in 0..N {
            got.extend(fast.take(1).await);
        }
        got
    });

    const N: usize = shared::domain::streams::hub::QUEUE + 200;
    let mut slowest = Duration::ZERO;
    let started = Instant::now();
    for i in 0..N {
        let t = Instant::now();
        send(&app, &user, &[fix((10.0, 50.0 + i as f64 * 1e-4), i as i64)]).await;
        slowest = slowest.max(t.elapsed());
    }
    let took = started.elapsed();
    let got = tokio::time::timeout(WAIT, reader).await.expect("the fast reader kept up").unwrap();
    assert_eq!(got.len(), N);
    assert!(is_sorted(&ids(&got)));
    assert!(slowest < Duration::from_secs(1), "the slowest ingest took {slowest:?} ({took:?} for {N})");

    // The stuck reader, reading at last, finds the reason and where to resume.
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stuck.read_to_end(&mut rest)).await;
    let text = String::from_utf8_lossy(&rest);
    let at = text.find("event: closed").unwrap_or_else(|| panic!("no closed event in {} bytes", rest.len()));
    let data = text[at..].lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
    let closed: Value = serde_json::from_str(data).unwrap();
    assert_eq!(closed["reason"], "lagging", "{closed}");
    assert!(closed["last_event_id"].is_string(), "{closed}");
}
