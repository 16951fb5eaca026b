//! What the pages Waymark serves (the trip tracking page, the console) share: their map tiles
//! and stream settings read from the environment, the Content-Security-Policy built from them,
//! the headers every page response carries, and JSON safe inside a page.

use axum::http::{HeaderValue, header};
use axum::response::Response;
use serde_json::Value;

/// Map tiles and the live stream, as a page is configured (`WAYMARK_TILE_URL`,
/// `WAYMARK_TILE_ATTRIBUTION`, `WAYMARK_STREAM_URL`; docs/tracking-page.md).
#[derive(Debug, Clone, Default)]
pub struct PageSettings {
    pub tile_url: Option<String>,
    pub tile_attribution: String,
    /// Where a page opens its stream (a WebSocket URL, or a path on the page's origin).
    pub stream_url: Option<String>,
}

impl PageSettings {
    pub fn from_env(env: &crate::config::Env) -> Self {
        let var = |k| env.get(k).map(str::to_owned);
        let tile_url = var("WAYMARK_TILE_URL").filter(|u| {
            let ok = tile_origin(u).is_some() && ["{z}", "{x}", "{y}"].iter().all(|p| u.contains(p));
            if !ok {
                tracing::warn!("WAYMARK_TILE_URL ignored: an http(s) URL with {{z}}, {{x}} and {{y}} is expected");
            }
            ok
        });
        Self {
            tile_url,
            tile_attribution: var("WAYMARK_TILE_ATTRIBUTION").unwrap_or_default(),
            stream_url: var("WAYMARK_STREAM_URL").filter(|u| {
                let ok = u.starts_with("wss://") || u.starts_with("ws://") || u.starts_with('/');
                if !ok {
                    tracing::warn!("WAYMARK_STREAM_URL ignored: a ws:// or wss:// URL, or a path, is expected");
                }
                ok
            }),
        }
    }

    /// These settings, with `path` as the stream unless one is set (`waymark serve`).
    pub fn with_default_stream(mut self, path: &str) -> Self {
        self.stream_url.get_or_insert_with(|| path.to_owned());
        self
    }

    /// The Content-Security-Policy of a page: its own scripts, styles and data only, images also
    /// from the tile server, connections also to a stream elsewhere.
    pub fn csp(&self) -> String {
        let tiles = self.tile_url.as_deref().and_then(tile_origin).map(|o| format!(" {o}")).unwrap_or_default();
        // A stream elsewhere (the WebSocket API on AWS) is named; on the page's origin 'self' covers it.
        let stream = match self.stream_url.as_deref() {
            Some(u) if !u.starts_with('/') => format!(" {}", u.split('/').take(3).collect::<Vec<_>>().join("/")),
            _ => String::new(),
        };
        format!(
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:{tiles}; \
             connect-src 'self'{stream}; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        )
    }
}

/// Scheme and host of a tile URL template, as a CSP source (`{s}.` subdomains become `*.`).
pub fn tile_origin(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    if scheme != "https" && scheme != "http" {
        return None;
    }
    let host = rest.split('/').next()?;
    let host = host.strip_prefix("{s}.").map(|h| format!("*.{h}")).unwrap_or_else(|| host.to_owned());
    let valid = !host.is_empty()
        && host.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '*' | '[' | ']'));
    valid.then(|| format!("{scheme}://{host}"))
}

/// The headers every page response carries: the policy, no referrer, no framing, no sniffing.
pub fn secure(mut res: Response, csp: &str, cache: &'static str) -> Response {
    let h = res.headers_mut();
    if let Ok(v) = HeaderValue::from_str(csp) {
        h.insert(header::CONTENT_SECURITY_POLICY, v);
    }
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert("x-robots-tag", HeaderValue::from_static("noindex, nofollow"));
    h.insert("cross-origin-opener-policy", HeaderValue::from_static("same-origin"));
    h.insert("permissions-policy", HeaderValue::from_static("geolocation=(), camera=(), microphone=()"));
    res
}

/// JSON safe inside a `<script type="application/json">` element (no `<`, `>` or `&` left).
pub fn script_json(v: &Value) -> String {
    v.to_string().replace('<', "\\u003c").replace('>', "\\u003e").replace('&', "\\u0026")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tile_origins() {
        assert_eq!(
            tile_origin("https://tile.openstreetmap.org/{z}/{x}/{y}.png").unwrap(),
            "https://tile.openstreetmap.org"
        );
        assert_eq!(tile_origin("https://{s}.tile.example.com/{z}/{x}/{y}.png").unwrap(), "https://*.tile.example.com");
        assert_eq!(tile_origin("http://127.0.0.1:8080/{z}/{x}/{y}.png").unwrap(), "http://127.0.0.1:8080");
        assert!(tile_origin("javascript:alert(1)").is_none());
        assert!(tile_origin("https://a b/{z}").is_none());
        assert!(tile_origin("https://x;script-src *").is_none());
    }

    #[test]
    fn script_json_cannot_close_the_element() {
        let s = script_json(&serde_json::json!({"name": "</script><script>alert(1)</script>&"}));
        assert!(!s.contains('<') && !s.contains('>') && !s.contains('&'));
        let back: Value = serde_json::from_str(&s).unwrap();
        assert_eq!(back["name"], "</script><script>alert(1)</script>&");
    }
}
