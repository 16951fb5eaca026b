//! `waymark serve` answers repeated GETs from the answers it keeps (`local::memo`): over real
//! HTTP, a read repeated after a write shows the write, and one repeated without shows the same.

mod common;

use common::{http, printed_keys, serve};

#[test]
fn repeated_reads_show_each_write_at_once() {
    let dir = std::env::temp_dir().join(format!("waymark-memo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (server, printed) = serve(&dir, &[("WAYMARK_RATE_LIMIT", "0")]);
    let key = printed_keys(&printed)["api_key"].as_str().unwrap().to_owned();
    let count = |port| {
        let (status, res) = http(port, "GET", "/v1/api/user/", &key, None);
        assert_eq!(status, 200, "{res}");
        res["data"]["users"].as_array().unwrap().len()
    };
    for n in 1..=5 {
        let (status, res) =
            http(server.port, "POST", "/v1/api/user/", &key, Some(r#"{"app_type": 1, "device_token": "t"}"#));
        assert_eq!(status, 201, "{res}");
        for _ in 0..3 {
            assert_eq!(count(server.port), n);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
