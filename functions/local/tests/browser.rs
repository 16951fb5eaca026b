//! The trip tracking page in a real browser: `waymark serve --memory` on a free port, then
//! functions/tracking/tests/browser/track.cjs drives headless Debian Chromium with playwright-core
//! (both installed, once, by scripts/browser-tools.sh): a user, a trip started and driven, the link
//! opened at 375 px and at desktop width (and with scripts off), the ETA, numbered places, a second
//! batch seen arriving, the end's final figures, a deleted trip's open page, a revoked link, 404s,
//! headers, axe-core's accessibility check (0 violations) and the first load's weight and paint time.
//! Screenshots and logs go to target/test-artifacts/tracking/. `WAYMARK_SKIP_BROWSER=1` skips it.
#![allow(clippy::disallowed_methods)] // tests and tools read their own settings from the environment

use std::fs::File;
use std::net::TcpStream;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{Reaped, free_port, root, tail};

#[test]
fn tracking_page_in_headless_chromium() {
    if std::env::var_os("WAYMARK_SKIP_BROWSER").is_some() {
        eprintln!("browser test skipped: WAYMARK_SKIP_BROWSER is set");
        return;
    }
    let root = root();
    let artifacts = root.join("target/test-artifacts/tracking");
    std::fs::create_dir_all(&artifacts).expect("creating the artifacts folder");

    let tools = Command::new("bash")
        .arg(root.join("scripts/browser-tools.sh"))
        .stderr(Stdio::inherit())
        .output()
        .expect("running scripts/browser-tools.sh");
    assert!(tools.status.success(), "scripts/browser-tools.sh failed: Chromium and playwright-core are needed");
    let playwright = String::from_utf8(tools.stdout).expect("utf-8 path").trim().to_owned();

    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let keys = [
        ("WAYMARK_API_KEY", "wm_sk_browser_test_secret_key"),
        ("WAYMARK_PUBLISHABLE_KEY", "wm_pk_browser_test_publishable"),
        ("WAYMARK_ACCESS_TOKEN", "wm_at_browser_test_access_token"),
    ];
    let server_log = artifacts.join("server.log");
    let server = Command::new(env!("CARGO_BIN_EXE_waymark"))
        .args(["serve", "--memory", "--port", &port.to_string()])
        .envs(keys)
        .env("WAYMARK_TRACKING_BASE_URL", format!("{base}/track"))
        .env("WAYMARK_TRACKING_REFRESH_SECONDS", "1")
        .env_remove("WAYMARK_TILE_URL")
        .env_remove("AWS_ENDPOINT_URL_DYNAMODB")
        .stdout(Stdio::null())
        .stderr(File::create(&server_log).expect("server log"))
        .spawn()
        .expect("starting waymark serve");
    let mut server = Reaped(server);
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = server.0.try_wait() {
            panic!("waymark serve exited ({status}):\n{}", tail(&server_log));
        }
        assert!(started.elapsed() < Duration::from_secs(30), "waymark serve did not listen on {port}");
        std::thread::sleep(Duration::from_millis(100));
    }

    let log = artifacts.join("browser.log");
    let out = File::create(&log).expect("browser log");
    let node = Command::new("node")
        .arg(root.join("functions/tracking/tests/browser/track.cjs"))
        .envs(keys)
        .env("WAYMARK_BASE", &base)
        .env("PLAYWRIGHT_CORE", &playwright)
        .env("ARTIFACTS", &artifacts)
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
        assert!(started.elapsed() < Duration::from_secs(240), "the browser test took over 4 minutes:\n{}", tail(&log));
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(status.success(), "browser checks failed ({status}); log {}:\n{}", log.display(), tail(&log));
    for shot in [
        "tracking-phone.png",
        "tracking-desktop.png",
        "tracking-phone-noscript.png",
        "tracking-phone-updated.png",
        "tracking-desktop-ended.png",
        "tracking-phone-gone.png",
        "tracking-desktop-gone.png",
        "tracking-404.png",
    ] {
        assert!(artifacts.join(shot).is_file(), "screenshot {shot} missing");
    }
    eprintln!("browser checks passed; screenshots in {}", artifacts.display());
}
