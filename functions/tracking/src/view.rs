//! The page's first view, rendered by the server from the same data the script draws: state,
//! ETA, figures and planned places are readable before any script runs (and with scripts off).
//! Times are written in UTC here (the server does not know the reader's zone); the script
//! rewrites them in local time.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::escape_html;

/// What `page.html`'s placeholders (`{{name}}`) receive, already escaped.
pub struct FirstView {
    pub pairs: Vec<(&'static str, String)>,
}

fn parse(v: &Value) -> Option<DateTime<Utc>> {
    v.as_str().and_then(|s| DateTime::parse_from_rfc3339(s).ok()).map(|t| t.with_timezone(&Utc))
}

fn clock(t: DateTime<Utc>) -> String {
    t.format("%H:%M UTC").to_string()
}

/// "just now", "4 min ago", "3 h ago", "2 d ago" (as the script writes it).
pub fn ago(t: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let s = (now - t).num_seconds().max(0);
    match s {
        0..60 => "just now".into(),
        60..3600 => format!("{} min ago", (s as f64 / 60.0).round() as i64),
        3600..86400 => format!("{} h ago", (s as f64 / 3600.0).round() as i64),
        _ => format!("{} d ago", (s as f64 / 86400.0).round() as i64),
    }
}

pub fn distance(m: f64) -> String {
    if m < 1000.0 {
        format!("{} m", m.round())
    } else {
        format!("{:.*} km", if m < 10_000.0 { 2 } else { 1 }, m / 1000.0)
    }
}

pub fn duration(s: i64) -> String {
    let (h, m) = (s / 3600, (s % 3600) / 60);
    match (s, h, m) {
        (0, ..) => "0 min".into(),
        (_, 0, 0) => format!("{s} s"),
        (_, 0, m) => format!("{m} min"),
        (_, h, m) => format!("{h} h {m} min"),
    }
}

pub fn state_text(state: &str) -> &'static str {
    match state {
        "created" => "Not started",
        "started" | "resumed" => "On the way",
        "paused" => "Paused",
        "ended" => "Ended",
        _ => "Unknown",
    }
}

/// The ETA line: (kind for styling and tests, text); kind "" hides it.
pub fn eta_line(eta: &Value, now: DateTime<Utc>) -> (&'static str, String) {
    let Some(at) = parse(&eta["arrival_at"]) else { return ("", String::new()) };
    let place = eta["name"].as_str().map(|n| format!(" at {n}")).unwrap_or_default();
    if eta["arrived"] == true {
        return ("arrived", format!("Arrived{place}"));
    }
    if (at - now).num_seconds() < 60 {
        return ("now", format!("Arriving now{place}"));
    }
    ("around", format!("Arriving around {}{place}", clock(at)))
}

fn kind_label(kind: &str) -> &'static str {
    match kind {
        "origin" => "Origin",
        "destination" => "Destination",
        _ => "Stop",
    }
}

fn waypoint_items(list: &[Value]) -> String {
    if list.is_empty() {
        return "<li class=\"empty\">No planned places</li>".into();
    }
    let mut out = String::new();
    for w in list {
        let kind = w["kind"].as_str().unwrap_or("stop");
        let name = w["name"].as_str().map(|n| format!(" · {}", escape_html(n))).unwrap_or_default();
        let reached = parse(&w["reached_at"]);
        let left = parse(&w["left_at"]);
        let mut times = match reached {
            Some(t) => format!("Arrived {}", clock(t)),
            None => "Not reached yet".into(),
        };
        if let Some(t) = left {
            times.push_str(&format!(", departed {}", clock(t)));
        }
        out.push_str(&format!(
            "<li class=\"{kind}\" data-kind=\"{kind}\" data-reached=\"{}\" data-left=\"{}\"><div class=\"wp-name\">{}{name}</div><div class=\"wp-times\">{times}</div></li>",
            reached.is_some(),
            left.is_some(),
            kind_label(kind),
        ));
    }
    out
}

/// The first view of `d` (the page's data) at `now`.
pub fn first_view(d: &Value, now: DateTime<Utc>) -> FirstView {
    let state = d["state"].as_str().unwrap_or("");
    let started = parse(&d["started_at"]);
    let ended = parse(&d["ended_at"]);
    let (eta_kind, eta_text) = eta_line(&d["eta"], now);
    let last_seen = match parse(&d["latest"]["recorded_at"]) {
        Some(t) => format!("{} ({})", clock(t), ago(t, now)),
        None => "No position yet".into(),
    };
    let hidden = |h: bool| if h { " hidden".to_owned() } else { String::new() };
    let refresh = if d["active"] == true {
        format!(" · refreshes every {} s", d["refresh_seconds"])
    } else {
        " · trip ended, final figures".into()
    };
    let pairs = vec![
        ("state", escape_html(state)),
        ("state_text", state_text(state).to_owned()),
        ("notice_hidden", hidden(true)),
        ("notice", String::new()),
        ("eta_kind", eta_kind.to_owned()),
        ("eta_hidden", hidden(eta_kind.is_empty())),
        ("eta_text", escape_html(&eta_text)),
        ("distance", distance(d["distance_m"].as_f64().unwrap_or(0.0))),
        ("duration", if started.is_some() { duration(d["duration_s"].as_i64().unwrap_or(0)) } else { "–".into() }),
        ("last_seen", last_seen),
        ("started", started.map(clock).unwrap_or_else(|| "Not yet".into())),
        ("ended_hidden", hidden(ended.is_none())),
        ("ended", ended.map(|t| format!("{} (ended {})", clock(t), ago(t, now))).unwrap_or_default()),
        ("waypoints", waypoint_items(d["waypoints"].as_array().map(Vec::as_slice).unwrap_or(&[]))),
        ("updated", parse(&d["generated_at"]).map(clock).unwrap_or_default()),
        ("refresh_note", refresh),
    ];
    FirstView { pairs }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn texts() {
        let now = DateTime::parse_from_rfc3339("2026-05-04T14:00:00Z").unwrap().with_timezone(&Utc);
        assert_eq!(distance(950.4), "950 m");
        assert_eq!(distance(1234.0), "1.23 km");
        assert_eq!(duration(3720), "1 h 2 min");
        assert_eq!(ago(now - chrono::Duration::minutes(5), now), "5 min ago");
        let eta = json!({"arrival_at": "2026-05-04T14:32:00.000Z", "arrived": false, "name": "Depot"});
        assert_eq!(eta_line(&eta, now), ("around", "Arriving around 14:32 UTC at Depot".into()));
        let eta = json!({"arrival_at": "2026-05-04T14:00:30.000Z", "arrived": false});
        assert_eq!(eta_line(&eta, now).1, "Arriving now");
        let eta = json!({"arrival_at": "2026-05-04T13:50:00.000Z", "arrived": true});
        assert_eq!(eta_line(&eta, now).1, "Arrived");
        assert_eq!(eta_line(&Value::Null, now).0, "");
    }

    #[test]
    fn names_are_escaped() {
        let items = waypoint_items(&[json!({"kind": "stop", "name": "<b>x</b>", "reached_at": null, "left_at": null})]);
        assert!(items.contains("Stop · &lt;b&gt;x&lt;/b&gt;") && !items.contains("<b>"), "{items}");
    }
}
