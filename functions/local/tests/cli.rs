//! The `waymark` binary as a newcomer uses it: serve, restart, keys from env, project create.
#![allow(clippy::disallowed_methods)] // tests and tools read their own settings from the environment

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::{Server, free_port, http, printed_keys, serve};
use serde_json::Value;

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

/// Run a `waymark project …` command on the file store in `dir`: (success, stdout, stderr).
fn project_cmd(dir: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_waymark"))
        .arg("project")
        .args(args)
        .arg("--data-dir")
        .arg(dir)
        .env_remove("AWS_ENDPOINT_URL_DYNAMODB")
        .output()
        .unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

#[test]
fn project_keys_are_listed_created_and_revoked_by_command() {
    let dir = std::env::temp_dir().join(format!("waymark-cli-keys-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (ok, out, err) = project_cmd(&dir, &["create", "--name", "Keys"]);
    assert!(ok, "{err}");
    let p: Value = serde_json::from_str(&out).unwrap();
    let pid = p["project_id"].as_str().unwrap();
    let (ok, out, err) =
        project_cmd(&dir, &["keys", "create", "--project-id", pid, "--kind", "secret", "--label", "ci"]);
    assert!(ok, "{err}");
    let made: Value = serde_json::from_str(&out).unwrap();
    assert!(made["key"].as_str().unwrap().starts_with("wm_sk_"), "{made}");
    let (ok, out, _) = project_cmd(&dir, &["keys", "list", "--project-id", pid]);
    assert!(ok);
    let list: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(list["keys"].as_array().unwrap().len(), 4, "{list}");
    assert!(!out.contains(made["key"].as_str().unwrap()), "never the key itself");
    // The first secret key goes; then the new one is the last and stays.
    let first = list["keys"].as_array().unwrap().iter().find(|k| k["kind"] == "secret" && k["label"] != "ci").unwrap();
    let (ok, _, err) =
        project_cmd(&dir, &["keys", "revoke", "--project-id", pid, "--key-id", first["key_id"].as_str().unwrap()]);
    assert!(ok, "{err}");
    let (ok, _, err) =
        project_cmd(&dir, &["keys", "revoke", "--project-id", pid, "--key-id", made["key_id"].as_str().unwrap()]);
    assert!(!ok && err.contains("last secret key"), "{err}");
    // The revoked key no longer works, the new one does.
    let (server, _) = serve(&dir, &[]);
    assert_eq!(http(server.port, "GET", "/v1/api/user/", p["api_key"].as_str().unwrap(), None).0, 401);
    assert_eq!(http(server.port, "GET", "/v1/api/user/", made["key"].as_str().unwrap(), None).0, 200);
    drop(server);
    let (ok, _, err) = project_cmd(&dir, &["keys", "list", "--project-id", "0123456789abcdef01234567"]);
    assert!(!ok && err.contains("project_id"), "{err}");
    let (ok, _, err) = project_cmd(&dir, &["keys", "create", "--project-id", pid, "--kind", "root"]);
    assert!(!ok && err.contains("--kind"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
