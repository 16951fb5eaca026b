//! The `waymark` binary as a newcomer uses it: serve, restart, keys from env, project create.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Start `waymark serve` on the file store in `dir`, wait until it listens, return it with
/// what it printed up to the keys.
fn serve(dir: &std::path::Path, env: &[(&str, &str)]) -> (Server, String) {
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
fn http(port: u16, method: &str, path: &str, key: &str, body: Option<&str>) -> (u16, Value) {
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

fn printed_keys(printed: &str) -> Value {
    serde_json::from_str(&printed[printed.find('{').unwrap()..]).unwrap()
}

#[test]
fn data_and_keys_survive_a_restart_and_env_keys_are_used() {
    let dir = std::env::temp_dir().join(format!("waymark-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let key = "wm_sk_test_fixed_key_0123456789";
    let (server, printed) = serve(&dir, &[("WAYMARK_API_KEY", key)]);
    let first = printed_keys(&printed);
    assert_eq!(first["api_key"], key);
    for k in ["project_id", "publishable_key", "access_token"] {
        assert!(first[k].as_str().is_some_and(|s| !s.is_empty()), "{k}");
    }
    let file: Value = serde_json::from_slice(&std::fs::read(dir.join("default-project.json")).unwrap()).unwrap();
    assert_eq!(file, first);
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join("default-project.json")).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "key file readable by others");
    }
    let (status, res) = http(server.port, "POST", "/v1/api/user/", key, Some(r#"{"app_type":1,"device_token":"t"}"#));
    assert_eq!(status, 201, "{res}");
    let user = res["data"]["user_id"].as_str().unwrap().to_owned();
    drop(server);

    // Restart without env: same project, same keys (from the file), same data.
    let (server, printed) = serve(&dir, &[]);
    assert_eq!(printed_keys(&printed), first);
    let (status, res) = http(server.port, "GET", "/v1/api/user/", key, None);
    assert_eq!(status, 200, "{res}");
    assert_eq!(res["data"]["users"][0]["id"], user.as_str());
    let publishable = first["publishable_key"].as_str().unwrap();
    let (status, _) = http(server.port, "GET", "/v1/api/user", publishable, None);
    assert_eq!(status, 403);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn project_create_prints_its_keys_and_they_work() {
    let dir = std::env::temp_dir().join(format!("waymark-cli-create-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(env!("CARGO_BIN_EXE_waymark"))
        .args(["project", "create", "--name", "acme", "--data-dir"])
        .arg(&dir)
        .env_remove("AWS_ENDPOINT_URL_DYNAMODB")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let p: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut keys: Vec<&str> = p.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["access_token", "account_id", "api_key", "project_id", "publishable_key"]);
    let (server, _) = serve(&dir, &[]);
    let (status, res) = http(server.port, "GET", "/v1/api/user/", p["api_key"].as_str().unwrap(), None);
    assert_eq!(status, 200, "{res}");
    assert_eq!(res["data"]["account_id"], p["account_id"]);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn serve_on_dynamodb_creates_its_tables_and_serves() {
    assert!(
        std::env::var_os("AWS_ENDPOINT_URL_DYNAMODB").is_some(),
        "AWS_ENDPOINT_URL_DYNAMODB is not set: run the tests with scripts/test.sh, which starts DynamoDB Local"
    );
    let dir = std::env::temp_dir().join(format!("waymark-cli-ddb-{}", std::process::id()));
    let prefix = format!("cli-{}-", std::process::id());
    let main = format!("{prefix}main");
    let locations = format!("{prefix}locations");
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_waymark"))
        .args(["serve", "--port", &port.to_string(), "--data-dir"])
        .arg(&dir)
        .env("WAYMARK_MAIN_TABLE", &main)
        .env("WAYMARK_LOCATIONS_TABLE", &locations)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut printed = String::new();
    while !printed.trim_end().ends_with('}') {
        assert!(out.read_line(&mut printed).unwrap() > 0, "serve exited: {printed}");
    }
    let server = Server { child, port };
    let key = printed_keys(&printed)["api_key"].as_str().unwrap().to_owned();
    let (status, res) = http(server.port, "POST", "/v1/api/user/", &key, Some(r#"{"app_type":2,"device_token":"t"}"#));
    assert_eq!(status, 201, "{res}");
    let (status, res) = http(server.port, "GET", "/v1/api/user/", &key, None);
    assert_eq!(status, 200, "{res}");
    assert_eq!(res["data"]["users"].as_array().unwrap().len(), 1);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
