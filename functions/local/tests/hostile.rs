//! `waymark serve` under clients that hold connections, send slowly or too much, or too often:
//! the server closes what it must and keeps answering a well-behaved client quickly.
#![allow(clippy::disallowed_methods)] // tests and tools read their own settings from the environment

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{http, printed_keys, raw, serve};

const IDLE: usize = 300;
const SLOW: usize = 50;

fn limits() -> Vec<(&'static str, &'static str)> {
    vec![
        ("WAYMARK_HEADER_TIMEOUT_SECS", "2"),
        ("WAYMARK_REQUEST_TIMEOUT_SECS", "3"),
        ("WAYMARK_MAX_CONNECTIONS", "1000"),
        ("WAYMARK_RATE_LIMIT", "0"),
    ]
}

/// Milliseconds a well-behaved `GET /v1/api/user/` takes, with its status.
fn timed_get(port: u16, key: &str) -> (u16, f64) {
    let t = Instant::now();
    let (status, _) = http(port, "GET", "/v1/api/user/", key, None);
    (status, t.elapsed().as_secs_f64() * 1000.0)
}

/// Whether the server closed `s` (read gives end of file) within `limit`.
fn closed_within(s: &mut TcpStream, limit: Duration) -> bool {
    s.set_read_timeout(Some(limit)).unwrap();
    let mut buf = [0u8; 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue, // an error answer before the close
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

/// `waymark serve` on a fresh file store in a temporary folder named after `tag`: the server,
/// its printed keys, and the folder (removed by the caller).
fn started(tag: &str, env: &[(&str, &str)]) -> (common::Server, serde_json::Value, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("waymark-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (server, printed) = serve(&dir, env);
    (server, printed_keys(&printed), dir)
}

#[test]
fn idle_and_slow_connections_neither_stay_nor_slow_others() {
    let (server, keys, dir) = started("hostile", &limits());
    let key = keys["api_key"].as_str().unwrap().to_owned();
    let port = server.port;
    let (_, before) = timed_get(port, &key);

    // Connections that send nothing, and connections that send their headers a byte at a time.
    let mut idle: Vec<TcpStream> = (0..IDLE).map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap()).collect();
    let mut slow: Vec<TcpStream> = (0..SLOW).map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap()).collect();
    let header = b"GET /v1/api/user/ HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    let started = Instant::now();
    let mut latencies = Vec::new();
    for i in 0..header.len().min(20) {
        for s in &mut slow {
            let _ = s.write_all(&header[i..=i]);
        }
        let (status, ms) = timed_get(port, &key);
        assert_eq!(status, 200);
        latencies.push(ms);
        std::thread::sleep(Duration::from_millis(50));
    }
    latencies.sort_by(f64::total_cmp);
    let worst = latencies[latencies.len() - 1];
    println!(
        "{IDLE} idle + {SLOW} slow connections held; a normal GET took {:.1} ms median, {worst:.1} ms worst \
         ({before:.1} ms before)",
        latencies[latencies.len() / 2]
    );
    assert!(worst < 100.0, "a normal client waited {worst:.1} ms");

    // The header timeout (2 s) closes both kinds, counted from when each started waiting.
    let limit = Duration::from_secs(4).saturating_sub(started.elapsed()) + Duration::from_secs(1);
    let closed_idle = idle.iter_mut().map(|s| closed_within(s, limit)).filter(|c| *c).count();
    let closed_slow = slow.iter_mut().map(|s| closed_within(s, Duration::from_millis(500))).filter(|c| *c).count();
    assert_eq!((closed_idle, closed_slow), (IDLE, SLOW), "connections closed by the header timeout");

    // A kept-alive connection left idle after a request is closed too.
    let mut kept = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(kept, "GET /v1/api/user/ HTTP/1.1\r\nHost: x\r\nApi-Key: {key}\r\n\r\n").unwrap();
    assert!(closed_within(&mut kept, Duration::from_secs(4)), "an idle kept-alive connection stays open");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn oversized_and_slowly_sent_bodies_get_a_clear_4xx() {
    let (server, keys, dir) = started("bodies", &limits());
    let key = keys["api_key"].as_str().unwrap().to_owned();
    let port = server.port;

    // Too big (over 2 MiB), on every kind of route: 413. The server may answer and close before
    // the body is sent whole, so the write is allowed to fail.
    let big = format!("{{\"x\": \"{}\"}}", "a".repeat(3 * 1024 * 1024));
    for path in ["/v1/api/user/", "/v1/api/location/", "/v1/api/geofence/", "/v2/trips", "/v1/api/webhooks/"] {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nApi-Key: {key}\r\nAuthorization: Bearer {key}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            big.len()
        );
        let _ = s.write_all(head.as_bytes()).and_then(|()| s.write_all(big.as_bytes()));
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        assert!(answer.starts_with("HTTP/1.1 413"), "{path}: {}", &answer[..answer.len().min(300)]);
    }

    // A body announced and then sent a byte a second: 408 naming the request, then closed.
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "POST /v1/api/user/ HTTP/1.1\r\nHost: x\r\nApi-Key: {key}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{"
    )
    .unwrap();
    let t = Instant::now();
    s.set_read_timeout(Some(Duration::from_millis(900))).unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while t.elapsed() < Duration::from_secs(8) {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(_) => {
                let _ = s.write_all(b" ");
            }
        }
    }
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("request:"), "the error names what was late: {answer}");
    let secs = t.elapsed().as_secs_f64();
    assert!((2.5..6.0).contains(&secs), "answered after {secs:.1} s (request timeout 3 s)");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_key_over_its_rate_gets_429_with_retry_after_and_other_keys_do_not() {
    let mut env = limits();
    env.retain(|(k, _)| *k != "WAYMARK_RATE_LIMIT");
    env.extend([("WAYMARK_RATE_LIMIT", "5"), ("WAYMARK_RATE_BURST", "10")]);
    let (server, keys, dir) = started("rate", &env);
    let (key, other) = (keys["api_key"].as_str().unwrap(), keys["publishable_key"].as_str().unwrap());
    let port = server.port;

    let statuses: Vec<u16> = (0..30).map(|_| http(port, "GET", "/v1/api/user/", key, None).0).collect();
    let ok = statuses.iter().filter(|s| **s == 200).count();
    assert!((10..=13).contains(&ok), "the burst of 10 and about the rate: {statuses:?}");
    assert!(statuses.iter().all(|s| *s == 200 || *s == 429), "{statuses:?}");
    let answer =
        raw(port, &format!("GET /v1/api/user/ HTTP/1.1\r\nHost: x\r\nApi-Key: {key}\r\nConnection: close\r\n\r\n"));
    assert!(answer.starts_with("HTTP/1.1 429"), "{answer}");
    assert!(answer.to_ascii_lowercase().contains("retry-after: 1"), "{answer}");
    assert!(answer.contains("api_key"), "names the key: {answer}");
    // Another key is not held back by this one.
    let (status, _) = http(port, "GET", "/v1/api/user/", other, None);
    assert_ne!(status, 429);
    // After the wait, the key works again.
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(http(port, "GET", "/v1/api/user/", key, None).0, 200);
    let _ = std::fs::remove_dir_all(&dir);
}
