//! Running the `waymark` binary in tests: start it, wait until it listens, talk HTTP/1.1.
#![allow(dead_code)] // each test file uses some of these

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub struct Server {
    pub child: Child,
    pub port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Kills and reaps a child process when dropped (also when the test panics).
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The workspace's root.
pub fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The last 40 lines of a log.
pub fn tail(path: &std::path::Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Start `waymark serve` on the file store in `dir`, wait until it listens, return it with
/// what it printed up to the keys.
pub fn serve(dir: &std::path::Path, env: &[(&str, &str)]) -> (Server, String) {
    let port = free_port();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_waymark"));
    cmd.args(["serve", "--port", &port.to_string(), "--data-dir"]).arg(dir);
    cmd.env_remove("AWS_ENDPOINT_URL_DYNAMODB").stdout(Stdio::piped()).stderr(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("waymark starts");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut printed = String::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !printed.trim_end().ends_with('}') {
        assert!(Instant::now() < deadline, "serve printed: {printed}");
        if out.read_line(&mut printed).unwrap() == 0 {
            panic!("serve exited: {printed}");
        }
    }
    (Server { child, port }, printed)
}

/// A minimal HTTP/1.1 client: the binary is tested through a real socket.
pub fn http(port: u16, method: &str, path: &str, key: &str, body: Option<&str>) -> (u16, Value) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let body = body.unwrap_or("");
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nApi-Key: {key}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let status = raw[9..12].parse().unwrap();
    let json = raw.split("\r\n\r\n").nth(1).unwrap();
    (status, serde_json::from_str(json).unwrap_or(Value::Null))
}

pub fn printed_keys(printed: &str) -> Value {
    serde_json::from_str(&printed[printed.find('{').unwrap()..]).unwrap()
}

/// The raw answer (status line, headers and body) to a request sent as is.
pub fn raw(port: u16, request: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}
