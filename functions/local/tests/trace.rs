//! One batch followed by its request id through the logs of `waymark serve`: the request, the
//! processor pass it runs and the webhook attempt it causes (delivered to a real HTTP receiver).
#![allow(clippy::disallowed_methods)] // tests and tools read their own settings from the environment

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Server, free_port, http};
use serde_json::{Value, json};

/// A receiver that answers every request 200 and counts them.
fn receiver() -> (u16, Arc<Mutex<usize>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let got = Arc::new(Mutex::new(0));
    let seen = got.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let mut conn = conn;
            let _ = conn.set_read_timeout(Some(Duration::from_millis(500)));
            let mut buf = [0u8; 65536];
            let _ = conn.read(&mut buf);
            *seen.lock().unwrap() += 1;
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    (port, got)
}

/// The answer's headers and body to a request sent with extra header lines.
fn send(port: u16, method: &str, path: &str, key: &str, extra: &str, body: &str) -> (String, Value) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nApi-Key: {key}\r\n{extra}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    (head.to_ascii_lowercase(), serde_json::from_str(body).unwrap_or(Value::Null))
}

fn header(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|l| l.strip_prefix(&format!("{name}: ")).map(|v| v.trim().to_owned()))
}

#[test]
fn a_batch_is_followed_by_its_request_id_to_its_webhook_attempt() {
    let dir = std::env::temp_dir().join(format!("waymark-trace-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_waymark"))
        .args(["serve", "--port", &port.to_string(), "--data-dir"])
        .arg(&dir)
        .env_remove("AWS_ENDPOINT_URL_DYNAMODB")
        .env("RUST_LOG", "info,shared=debug")
        .env("WAYMARK_WEBHOOK_ALLOW_PRIVATE", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("waymark starts");
    // Every line it prints, kept for the checks below.
    let log = Arc::new(Mutex::new(String::new()));
    let out = BufReader::new(child.stdout.take().unwrap());
    let kept = log.clone();
    std::thread::spawn(move || {
        for line in out.lines().map_while(Result::ok) {
            let mut l = kept.lock().unwrap();
            l.push_str(&line);
            l.push('\n');
        }
    });
    let server = Server { child, port };
    let deadline = Instant::now() + Duration::from_secs(30);
    // `serve` prints the default project's keys as a JSON object once it listens.
    let keys: Value = loop {
        let printed = log.lock().unwrap().clone();
        if let Some(i) = printed.find('{')
            && let Some(j) = printed[i..].find("\n}")
        {
            break serde_json::from_str(&printed[i..i + j + 2]).expect("the keys");
        }
        assert!(Instant::now() < deadline, "serve printed: {printed}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let key = keys["api_key"].as_str().unwrap().to_owned();

    let (rx_port, received) = receiver();
    let hook = json!({"url": format!("http://127.0.0.1:{rx_port}/hook"), "events": ["location.updated"]});
    let (status, res) = http(port, "POST", "/v1/api/webhooks/", &key, Some(&hook.to_string()));
    assert!(status == 200 || status == 201, "{res}");
    let (status, res) = http(port, "POST", "/v1/api/user/", &key, Some(r#"{"app_type":1,"device_token":"t"}"#));
    assert_eq!(status, 201, "{res}");
    let user = res["data"]["user_id"].as_str().unwrap().to_owned();

    let now = chrono::Utc::now();
    let fixes: Vec<Value> = (0..3)
        .map(|i| {
            let at =
                (now - chrono::Duration::seconds(30 - 10 * i)).to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
            json!({"coordinates": [13.40 + 0.001 * i as f64, 52.52], "recorded_at": at, "accuracy": 5.0})
        })
        .collect();
    let body = json!({"user_id": user, "locations": fixes}).to_string();
    let id = "trace-batch-42";
    let (head, res) = send(port, "POST", "/v1/api/location/", &key, &format!("X-Request-Id: {id}\r\n"), &body);
    assert!(head.starts_with("http/1.1 20"), "{head} {res}");
    assert_eq!(header(&head, "x-request-id").as_deref(), Some(id), "the answer names its request");

    // The request, the pass it ran and the delivery attempt it caused all name the id.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let printed = log.lock().unwrap().clone();
        let with_id: Vec<&str> = printed.lines().filter(|l| l.contains(id)).collect();
        let has = |what: &str| with_id.iter().any(|l| l.contains(what));
        if has("answered") && has("processor pass") && has("webhook attempt") {
            let attempt = with_id.iter().find(|l| l.contains("webhook attempt")).unwrap();
            assert!(attempt.contains("status=Some(200)"), "{attempt}");
            assert!(*received.lock().unwrap() >= 1);
            break;
        }
        assert!(Instant::now() < deadline, "lines naming {id}:\n{}\nall:\n{printed}", with_id.join("\n"));
        std::thread::sleep(Duration::from_millis(100));
    }

    // Without an id of its own (or with one that could forge a log line) a request gets a new one.
    let (head, _) = send(port, "GET", "/v1/api/user/", &key, "X-Request-Id: a b\r\n", "");
    let made = header(&head, "x-request-id").expect("an id is answered");
    assert!(made.len() >= 8 && made != "a b", "{made}");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
