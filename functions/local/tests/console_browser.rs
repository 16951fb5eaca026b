//! The web console (/console/) in a real browser: `waymark serve --memory` on a free port (and
//! `waymark serve --dynamodb` too when AWS_ENDPOINT_URL_DYNAMODB is set, as scripts/test.sh sets
//! it), then functions/console/tests/browser/console.cjs drives headless Debian Chromium with
//! playwright-core (both installed, once, by scripts/browser-tools.sh): sign-in refusals, sign-in
//! and out, seeded users and fences on the map, a fix moving its marker through the stream with
//! no polling, fences drawn and dragged with the mouse and checked through the API, trip
//! controls and a v2 trip's planned stops, a scoped fence's users inside it, the events feed, a
//! failed webhook delivery replayed to a real receiver, offline and
//! back, a revoked session, axe-core (0 WCAG 2.2 A/AA violations) on every view at 375 px and
//! 1280 px, and no request off the server's origin. Before it, a short pass with map tiles
//! (functions/console/tests/browser/tiles.cjs): WAYMARK_TILE_URL set to a tile server of the
//! test's own on another port, tiles load from it under the page's CSP and nothing goes
//! elsewhere. Screenshots and logs go to target/test-artifacts/console/ (DynamoDB: its
//! `dynamodb/` folder; tiles: `tiles/`). `WAYMARK_SKIP_BROWSER=1` skips it.
#![allow(clippy::disallowed_methods)] // tests and tools read their own settings from the environment

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod common;
use common::{Reaped, free_port, root, tail};

const KEYS: [(&str, &str); 3] = [
    ("WAYMARK_API_KEY", "wm_sk_console_test_secret_key"),
    ("WAYMARK_PUBLISHABLE_KEY", "wm_pk_console_test_publishable"),
    ("WAYMARK_ACCESS_TOKEN", "wm_at_console_test_access_token"),
];

const SHOTS: [&str; 12] = [
    "console-signin-desktop.png",
    "console-signin-phone.png",
    "console-map-desktop.png",
    "console-map-phone.png",
    "console-trips-desktop.png",
    "console-trips-phone.png",
    "console-geofences-desktop.png",
    "console-geofences-phone.png",
    "console-events-desktop.png",
    "console-events-phone.png",
    "console-webhooks-desktop.png",
    "console-webhooks-phone.png",
];

/// `waymark serve` on a free port and `store` ("memory" or "dynamodb"), its log in `artifacts`,
/// with `tiles` as WAYMARK_TILE_URL (and its attribution) or no tile URL; returns it and its URL.
fn start_server(store: &str, artifacts: &Path, tiles: Option<(&str, &str)>) -> (Reaped, String) {
    std::fs::create_dir_all(artifacts).expect("creating the artifacts folder");
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let server_log = artifacts.join("server.log");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_waymark"));
    cmd.args(["serve", "--port", &port.to_string()])
        .envs(KEYS)
        .env("WAYMARK_TRACKING_BASE_URL", format!("{base}/track"))
        // The receiver is on loopback over http; one retry a day later, so a failed attempt
        // stays failed until the console replays it.
        .env("WAYMARK_WEBHOOK_ALLOW_PRIVATE", "1")
        .env("WAYMARK_WEBHOOK_RETRY_SCHEDULE", "86400")
        .env_remove("WAYMARK_STREAM_URL");
    match tiles {
        Some((url, attribution)) => cmd.env("WAYMARK_TILE_URL", url).env("WAYMARK_TILE_ATTRIBUTION", attribution),
        None => cmd.env_remove("WAYMARK_TILE_URL").env_remove("WAYMARK_TILE_ATTRIBUTION"),
    };
    if store == "dynamodb" {
        // Tables of this run only (created by serve), beside any other test's.
        let data = artifacts.join("data");
        std::fs::create_dir_all(&data).expect("creating the data folder");
        cmd.arg("--dynamodb")
            .arg("--data-dir")
            .arg(&data)
            .env("WAYMARK_MAIN_TABLE", format!("console-browser-{port}-main"))
            .env("WAYMARK_LOCATIONS_TABLE", format!("console-browser-{port}-locations"));
    } else {
        cmd.arg("--memory").env_remove("AWS_ENDPOINT_URL_DYNAMODB");
    }
    let server = cmd
        .stdout(Stdio::null())
        .stderr(File::create(&server_log).expect("server log"))
        .spawn()
        .expect("starting waymark serve");
    let mut server = Reaped(server);
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = server.0.try_wait() {
            panic!("waymark serve ({store}) exited ({status}):\n{}", tail(&server_log));
        }
        assert!(started.elapsed() < Duration::from_secs(60), "waymark serve ({store}) did not listen on {port}");
        std::thread::sleep(Duration::from_millis(100));
    }
    (server, base)
}

/// Runs `script` (of functions/console/tests/browser/) against `base` with `env`, its output in
/// `artifacts/browser.log`; fails the test when it fails or takes over `limit`.
fn drive(
    script: &str,
    base: &str,
    playwright: &str,
    artifacts: &Path,
    env: &[(&str, &str)],
    limit: Duration,
    what: &str,
) {
    let log = artifacts.join("browser.log");
    let out = File::create(&log).expect("browser log");
    let node = Command::new("node")
        .arg(root().join("functions/console/tests/browser").join(script))
        .envs(KEYS)
        .envs(env.iter().copied())
        .env("WAYMARK_BASE", base)
        .env("PLAYWRIGHT_CORE", playwright)
        .env("ARTIFACTS", artifacts)
        .stdout(out.try_clone().expect("log handle"))
        .stderr(out)
        .spawn()
        .expect("starting node");
    let mut node = Reaped(node);
    let started = Instant::now();
    let status = loop {
        if let Some(status) = node.0.try_wait().expect("waiting for node") {
            break status;
        }
        assert!(started.elapsed() < limit, "{script} ({what}) took over {limit:?}:\n{}", tail(&log));
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(status.success(), "{script} failed ({what}, {status}); log {}:\n{}", log.display(), tail(&log));
}

/// One run of console.cjs against a fresh `waymark serve` on `store`, with no tile URL.
fn run(playwright: &str, store: &str, artifacts: &Path) {
    let (_server, base) = start_server(store, artifacts, None);
    drive("console.cjs", &base, playwright, artifacts, &[], Duration::from_secs(300), store);
    for shot in SHOTS {
        assert!(artifacts.join(shot).is_file(), "screenshot {shot} missing ({store})");
    }
    eprintln!("console checks passed on {store}; screenshots in {}", artifacts.display());
}

/// A 1 × 1 grey PNG: every tile the test's tile server answers with.
const TILE_PNG: [u8; 67] = [
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00, 0x00, 0x00, 0x00, 0x3a, 0x7e, 0x9b, 0x55, 0x00, 0x00, 0x00, 0x0a, 0x49,
    0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xb8, 0x00, 0x00, 0x00, 0xd2, 0x00, 0xd1, 0xdb, 0xd9, 0x0e, 0xb7, 0x00, 0x00,
    0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// What the tile server was asked: the request line, and whether it carried a Referer or a Cookie.
struct TileRequest {
    line: String,
    leaked: bool,
}

/// The test's tile server, on another loopback port (so another origin than the console's): any
/// `GET /{z}/{x}/{y}.png` is a PNG, anything else a 404; every request is kept.
fn tile_server() -> (u16, Arc<Mutex<Vec<TileRequest>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding the tile server");
    let port = listener.local_addr().expect("tile server address").port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    // A thread a connection: Chromium opens connections ahead of use, and an idle one must not
    // hold up the rest. The threads end with the test's process.
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let log = Arc::clone(&log);
            std::thread::spawn(move || tile(conn, &log));
        }
    });
    (port, seen)
}

/// One request a connection (`Connection: close`): plenty for the few dozen tiles of the pass.
fn tile(conn: TcpStream, log: &Mutex<Vec<TileRequest>>) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
    let mut reader = BufReader::new(&conn);
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return; // opened ahead of use, never used
    }
    let mut leaked = false;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 || header.trim().is_empty() {
            break;
        }
        let name = header.split(':').next().unwrap_or("").trim().to_ascii_lowercase();
        leaked |= name == "referer" || name == "cookie";
    }
    let line = line.trim().to_owned();
    let ok = is_tile(&line);
    log.lock().expect("tile log").push(TileRequest { line, leaked });
    let mut w = &conn;
    let _ = if ok {
        write!(
            w,
            "HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
            TILE_PNG.len()
        )
        .and_then(|()| w.write_all(&TILE_PNG))
    } else {
        w.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    };
}

/// `GET /{z}/{x}/{y}.png HTTP/1.1`, with numbers.
fn is_tile(line: &str) -> bool {
    let mut parts = line.split(' ');
    let (Some("GET"), Some(path)) = (parts.next(), parts.next()) else { return false };
    let Some(zxy) = path.strip_prefix('/').and_then(|p| p.strip_suffix(".png")) else { return false };
    let nums: Vec<&str> = zxy.split('/').collect();
    nums.len() == 3 && nums.iter().all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The short pass with map tiles (tiles.cjs) on the memory store: WAYMARK_TILE_URL is the test's
/// tile server; tiles load from it and from nowhere else, under the page's policy.
fn run_tiles(playwright: &str, artifacts: &Path) {
    let started = Instant::now();
    let (tile_port, seen) = tile_server();
    let origin = format!("http://127.0.0.1:{tile_port}");
    // Markup in the attribution: the page must show it as text.
    let attribution = "Tiles © the test's <b>own</b> server";
    let (_server, base) =
        start_server("memory", artifacts, Some((&format!("{origin}/{{z}}/{{x}}/{{y}}.png"), attribution)));
    let env = [("TILE_ORIGIN", origin.as_str()), ("TILE_ATTRIBUTION", attribution)];
    drive("tiles.cjs", &base, playwright, artifacts, &env, Duration::from_secs(90), "memory, tiles");
    let seen = seen.lock().expect("tile log");
    // Two views at zoom 14 and one at 15 cover at least 4 tiles each.
    assert!(seen.len() >= 12, "the tile server was asked for {} tiles", seen.len());
    let odd: Vec<&str> = seen.iter().filter(|r| !is_tile(&r.line)).map(|r| r.line.as_str()).collect();
    assert!(odd.is_empty(), "the tile server was asked for something other than tiles: {odd:?}");
    assert!(!seen.iter().any(|r| r.leaked), "a tile request carried a Referer or a Cookie");
    eprintln!(
        "tile checks passed in {:.0?}: {} tiles served; screenshots in {}",
        started.elapsed(),
        seen.len(),
        artifacts.display()
    );
}

#[test]
fn console_in_headless_chromium() {
    if std::env::var_os("WAYMARK_SKIP_BROWSER").is_some() {
        eprintln!("browser test skipped: WAYMARK_SKIP_BROWSER is set");
        return;
    }
    let root = root();
    let artifacts = root.join("target/test-artifacts/console");
    let tools = Command::new("bash")
        .arg(root.join("scripts/browser-tools.sh"))
        .stderr(Stdio::inherit())
        .output()
        .expect("running scripts/browser-tools.sh");
    assert!(tools.status.success(), "scripts/browser-tools.sh failed: Chromium and playwright-core are needed");
    let playwright = String::from_utf8(tools.stdout).expect("utf-8 path").trim().to_owned();

    // The short pass with tiles first: it fails fast.
    run_tiles(&playwright, &artifacts.join("tiles"));
    run(&playwright, "memory", &artifacts);
    if std::env::var_os("AWS_ENDPOINT_URL_DYNAMODB").is_some() {
        run(&playwright, "dynamodb", &artifacts.join("dynamodb"));
    } else {
        eprintln!("DynamoDB run skipped: AWS_ENDPOINT_URL_DYNAMODB is not set (scripts/test.sh sets it)");
    }
}
