//! The web console (/console/) in a real browser: `waymark serve --memory` on a free port (and
//! `waymark serve --dynamodb` too when AWS_ENDPOINT_URL_DYNAMODB is set, as scripts/test.sh sets
//! it), then functions/console/tests/browser/console.cjs drives headless Debian Chromium with
//! playwright-core (both installed, once, by scripts/browser-tools.sh): sign-in refusals, sign-in
//! and out, seeded users and fences on the map, a fix moving its marker through the stream with
//! no polling, fences drawn and dragged with the mouse and checked through the API, trip
//! controls and a v2 trip's planned stops, a scoped fence's users inside it, the events feed, a
//! failed webhook delivery replayed to a real receiver, offline and
//! back, a revoked session, axe-core (0 WCAG 2.2 A/AA violations) on every view at 375 px and
//! 1280 px, and no request off the server's origin. Screenshots and logs go to
//! target/test-artifacts/console/ (DynamoDB: its `dynamodb/` folder). `WAYMARK_SKIP_BROWSER=1`
//! skips it.
#![allow(clippy::disallowed_methods)] // tests and tools read their own settings from the environment

use std::fs::File;
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
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

/// One run of console.cjs against a fresh `waymark serve` on `store` ("memory" or "dynamodb").
fn run(playwright: &str, store: &str, artifacts: &Path) {
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
        .env_remove("WAYMARK_TILE_URL")
        .env_remove("WAYMARK_STREAM_URL");
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

    let log = artifacts.join("browser.log");
    let out = File::create(&log).expect("browser log");
    let node = Command::new("node")
        .arg(root().join("functions/console/tests/browser/console.cjs"))
        .envs(KEYS)
        .env("WAYMARK_BASE", &base)
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
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "the console browser test ({store}) took over 5 minutes:\n{}",
            tail(&log)
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(status.success(), "console checks failed on {store} ({status}); log {}:\n{}", log.display(), tail(&log));
    for shot in SHOTS {
        assert!(artifacts.join(shot).is_file(), "screenshot {shot} missing ({store})");
    }
    eprintln!("console checks passed on {store}; screenshots in {}", artifacts.display());
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

    run(&playwright, "memory", &artifacts);
    if std::env::var_os("AWS_ENDPOINT_URL_DYNAMODB").is_some() {
        run(&playwright, "dynamodb", &artifacts.join("dynamodb"));
    } else {
        eprintln!("DynamoDB run skipped: AWS_ENDPOINT_URL_DYNAMODB is not set (scripts/test.sh sets it)");
    }
}
