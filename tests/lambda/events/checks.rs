//! What each event's answer must hold and what it must change (`check_data`, `check_effect`),
//! and the week of fixes of `Setup::Routine`: the checks of `events.rs`, apart from its cases.

use super::*;

fn is_id(v: &Value) -> bool {
    v.as_str().is_some_and(|id| id.len() == 24 && id.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn len(v: &Value) -> usize {
    v.as_array().unwrap_or_else(|| panic!("not an array: {v}")).len()
}

/// The v1 form of an operation Roam documents at both versions answers as its v3 form.
fn v3_name(name: &str) -> String {
    match name {
        "trips-v1-delete" => "trips-v3-delete".to_owned(),
        n if n.starts_with("moving-geofences-v1-") || n.starts_with("insights-v1-") => n.replacen("v1-", "", 1),
        n => n.to_owned(),
    }
}

/// What the answer to each event must hold beyond the envelope: v1/v3 `data`, the whole v2 body.
pub(super) fn check_data(name: &str, fx: &Fixture, data: &Value) {
    let name = v3_name(name);
    let name = name.as_str();
    let user = fx.user_id.as_str();
    let trip = fx.trip_id.as_deref().unwrap_or("(no trip)");
    let fence = fx.geofence_id.as_deref().unwrap_or("(no geofence)");
    let webhook = fx.webhook_id.as_deref().unwrap_or("(no webhook)");
    let event = fx.event_id.as_deref().unwrap_or("(no event)");
    match name {
        "tracking-data" => {
            assert_eq!(data["state"], "started", "{data}");
            assert_eq!(data["active"], true, "{data}");
            assert_eq!(len(&data["route"]) as u64, INGESTED, "{data}");
            // The setup's trip plans no places.
            assert_eq!(data["waypoints"], json!([]), "{data}");
            assert!(data["distance_m"].as_f64().is_some_and(|d| d > 0.0), "{data}");
            assert!(data["latest"]["recorded_at"].is_string(), "{data}");
        }
        "tracking-page" => {
            let html = data.as_str().expect("page");
            assert!(html.contains("<html") && html.contains("\"route\":["), "{name}: {html}");
        }
        "console-page" => {
            let html = data.as_str().expect("page");
            assert!(html.contains("<html") && html.contains("\"stream_url\":\"wss://"), "{name}: {html}");
        }
        _ => {}
    }
    match name {
        "keys-list" => assert_eq!(len(&data["keys"]), 3, "the project's three keys: {data}"),
        "keys-create" => {
            assert!(data["key"].as_str().is_some_and(|k| k.starts_with("wm_sk_")), "{data}");
            assert_eq!(data["label"], "deploy pipeline", "{data}");
        }
        "keys-revoke" => assert_eq!(data["kind"], "publishable", "{data}"),
        "keys-console-session-open" => {
            assert!(data["token"].as_str().is_some_and(|k| k.starts_with("wm_cs_")), "{data}");
            assert!(data["expires_at"].is_string(), "{data}");
        }
        "keys-console-session-end" => assert_eq!(data["signed_out"], true, "{data}"),
        "keys-stream-token-mint" => {
            assert!(data["token"].as_str().is_some_and(|k| k.starts_with("wm_st_")), "{data}");
            assert_eq!(data["filter"]["user_id"], user, "{data}");
        }
        "keys-stream-token-revoke" => assert!(data["token_id"].is_string(), "{data}"),
        "search-users-in-view" => {
            let found = data["positions"].as_array().expect("positions");
            assert!(found.iter().any(|p| p["user_id"] == user), "{data}");
            assert_eq!(data["truncated"], false, "{data}");
        }
        "search-geofences-in-view" => {
            let found = data["geofences"].as_array().expect("geofences");
            assert!(found.iter().any(|g| g["id"] == fence && g["description"] == "North depot gate"), "{data}");
            assert_eq!(data["truncated"], false, "{data}");
        }
        "users-create" => assert!(is_id(&data["user_id"]), "{name}: {data}"),
        "users-list" => assert!(data["users"].as_array().expect("users").iter().any(|u| u["id"] == user), "{data}"),
        "users-get" => assert_eq!(data["users"][0]["id"], user, "{data}"),
        "users-update" => assert_eq!(data["description"], "Driver 7 (night shift)", "{data}"),
        "users-delete" => assert_eq!(data["is_deleted"], true, "{data}"),
        "locations-ingest" => assert_eq!(data["stored"], INGESTED, "{data}"),
        "locations-list" => {
            assert_eq!(data["locations"].as_array().expect("locations").len() as u64, INGESTED, "{data}")
        }
        "locations-list-encoded" => {
            assert_eq!(data["count"], INGESTED, "{data}");
            assert!(data["polyline"].as_str().is_some_and(|p| !p.is_empty()), "{data}");
        }
        "groups-add-put" | "groups-add-post" => {
            assert!(data.as_str().is_some_and(|s| s.starts_with("1 user")), "{data}")
        }
        "groups-create" => {
            assert!(is_id(&data["group_id"]), "{data}");
            assert_eq!(data["users"], json!([user]), "{data}");
        }
        "trips-events-list" => {
            let events = data["events"].as_array().expect("events");
            let reached = events.iter().find(|e| e["event_type"] == "trip:user_reached_origin").expect("reached");
            assert_eq!(reached["trip_id"], trip, "{data}");
            assert_eq!(reached["location"]["coordinates"], json!([-0.1276, 51.5072]), "{data}");
        }

        // v1 and v3: `data` is a list of one trip, a page of trips, a summary or null.
        "trips-v1-create" | "trips-v3-create" => {
            let t = &data[0];
            assert!(is_id(&t["id"]), "{name}: {data}");
            assert_eq!(t["user_id"], user, "{data}");
            assert_eq!((len(&t["origins"]), len(&t["destinations"])), (1, 1), "{data}");
            assert_eq!(t["is_started"], false, "{data}");
            let base = format!("{}/", fx.state.config.tracking_base_url.trim_end_matches('/'));
            assert!(t["trip_tracking_url"].as_str().is_some_and(|u| u.starts_with(&base)), "{data}");
        }
        "trips-v1-list" => assert!(data["trips"].as_array().expect("trips").iter().any(|t| t["id"] == trip), "{data}"),
        "trips-v3-list" => assert!(data.as_array().expect("trips").iter().any(|t| t["id"] == trip), "{data}"),
        "trips-v1-get" | "trips-v3-get" => assert_eq!(data[0]["id"], trip, "{data}"),
        "trips-v1-update" | "trips-v3-update" => {
            assert_eq!(data[0]["id"], trip, "{data}");
            assert_eq!(data[0]["metadata"]["vehicle"], "van", "{data}");
            assert_eq!(len(&data[0]["destinations"]), 1, "{data}");
        }
        "trips-v3-delete" => assert!(data.is_null(), "{data}"),
        "trips-v1-summary" | "trips-v3-summary" => {
            assert_eq!(data["trip_id"], trip, "{data}");
            assert_eq!(data["trip_status"], "started", "{data}");
            assert_eq!(len(&data["route"]) as u64, INGESTED, "{data}");
            assert!(data["distance_covered"].as_f64().is_some_and(|d| d > 0.0), "{data}");
        }
        "trips-v1-controls" | "trips-v3-controls" => {
            assert_eq!(data[0]["id"], trip, "{data}");
            assert_eq!(data[0]["is_started"], true, "{data}");
            assert!(data[0]["trip_started_at"].is_string(), "{data}");
        }
        "trips-v1-revoke-link" => {
            assert_eq!(data["trip_id"], trip, "{data}");
            let base = format!("{}/", fx.state.config.tracking_base_url.trim_end_matches('/'));
            assert!(data["trip_tracking_url"].as_str().is_some_and(|u| u.starts_with(&base)), "{data}");
        }
        "settings-get" => assert_eq!(data, &json!({"tracking_link_ttl_hours": 24, "retention_days": null}), "{data}"),
        "settings-update" => {
            assert_eq!(data, &json!({"tracking_link_ttl_hours": 48, "retention_days": 400}), "{data}")
        }
        "trips-v1-quick" | "trips-v3-quick" => {
            assert!(is_id(&data[0]["id"]), "{data}");
            assert_eq!(data[0]["user_id"], user, "{data}");
            assert_eq!(data[0]["is_started"], true, "{data}");
        }

        // v2: the body holds `trip`, `trips` or `summary`.
        "trips-v2-create" => {
            let t = &data["trip"];
            assert!(is_id(&t["id"]), "{data}");
            assert_eq!(t["trip_state"], "created", "{data}");
            assert_eq!(t["user"]["id"], user, "{data}");
            assert_eq!(len(&t["stops"]), 2, "{data}");
        }
        "trips-v2-list" => {
            assert!(data["trips"].as_array().expect("trips").iter().any(|t| t["id"] == trip), "{data}");
            assert_eq!(data["has_more"], false, "{data}");
        }
        "trips-v2-get" => assert_eq!(data["trip"]["id"], trip, "{data}"),
        "trips-v2-update" => {
            assert_eq!(data["trip"]["id"], trip, "{data}");
            assert_eq!(data["trip"]["name"], "Delivery A-1042 (rerouted)", "{data}");
            assert_eq!(len(&data["trip"]["stops"]), 2, "{data}");
        }
        "trips-v2-delete" => assert_eq!(data["trip"], json!({"id": trip, "is_deleted": true}), "{data}"),
        "trips-v2-summary" => {
            let s = &data["summary"];
            assert_eq!(s["trip_id"], trip, "{data}");
            assert_eq!(len(&s["route"]) as u64, INGESTED, "{data}");
            assert!(s["distance_covered"].as_f64().is_some_and(|d| d > 0.0), "{data}");
        }
        "trips-v2-controls" => {
            assert_eq!(data["trip"]["id"], trip, "{data}");
            assert_eq!(data["trip"]["trip_state"], "started", "{data}");
            assert!(data["trip"]["started_at"].is_string(), "{data}");
        }
        // Geofences, search and moving geofences (v1/v3 envelope).
        "locations-ingest-fenced" => assert_eq!(data["stored"], INGESTED, "{data}"),
        "geofences-v1-create-circle" => {
            // The fixture leaves out geometry_type, as Roam's examples do: inferred.
            assert!(is_id(&data["geofence_id"]), "{data}");
            assert_eq!(data["geometry_type"], "circle", "{data}");
            assert_eq!(data["geometry_radius"], 75, "{data}");
            assert_eq!(data["is_enabled"], true, "{data}");
            assert_eq!(data["metadata"]["zone"], "north", "{data}");
        }
        "geofences-v3-create-polygon" => {
            assert!(is_id(&data["id"]), "{data}");
            assert_eq!(data["geometry_type"], "polygon", "{data}");
            assert_eq!(data["geometry"]["type"], "Polygon", "{data}");
            assert_eq!(len(&data["geometry"]["coordinates"][0]), 5, "the ring is closed: {data}");
        }
        "geofences-v1-create-scoped" => {
            assert!(is_id(&data["geofence_id"]), "{data}");
            assert_eq!(data["user_ids"], json!([user]), "{data}");
            assert_eq!(data["group_ids"], json!(["drivers-north"]), "{data}");
            assert_eq!(data["is_enabled"][0], true, "{data}");
        }
        "geofences-v1-update" => {
            assert_eq!(data["geofence_id"], fence, "{data}");
            assert_eq!(data["description"], "North depot gate (night)", "{data}");
            assert_eq!(data["metadata"]["shift"], "night", "{data}");
        }
        "geofences-v3-update" => {
            assert_eq!(data["id"], fence, "{data}");
            assert_eq!((&data["tag"], &data["is_enabled"]), (&json!("depot-closed"), &json!(false)), "{data}");
        }
        "geofences-v1-list" => {
            assert!(data["geofences"].as_array().expect("list").iter().any(|g| g["geofence_id"] == fence))
        }
        "geofences-v3-list" => {
            let g = data["geofences"].as_array().expect("list").iter().find(|g| g["id"] == fence);
            // The visit's entry, by the user.
            assert_eq!(g.map(|g| &g["counts"]), Some(&json!({"events": 1, "users": 1})), "{data}");
        }
        "geofences-v1-list-metadata" => {
            assert!(data["geofences"].as_array().expect("list").iter().any(|g| g["geofence_id"] == fence), "{data}")
        }
        "geofences-v1-delete-query" | "geofences-v1-delete-body" | "geofences-v3-delete-array" => {
            assert_eq!(data, &json!({}), "{data}")
        }
        "geofences-events-list" => {
            let events = data["events"].as_array().expect("events");
            assert!(events.iter().all(|e| e["user_id"] == user), "{data}");
            assert!(
                events.iter().any(|e| e["geofence_id"] == fence && e["event_type"] == "motion:geofence:entry"),
                "{data}"
            );
        }
        "trips-v1-export" | "trips-v3-export" => {
            let url = data["download_url"].as_str().expect("download_url");
            assert!(url.ends_with("/gpx") && !url.contains(trip), "{data}");
        }
        "locations-gpx" | "trips-v1-gpx" | "trips-v3-gpx" => {
            let doc = data.as_str().expect("gpx");
            assert!(doc.contains("<gpx") && doc.contains("version=\"1.1\"") && doc.contains("<trkpt"), "{name}: {doc}");
        }
        "search-users" => {
            assert!(data["users"].as_array().expect("users").iter().any(|u| u["id"] == user), "{data}");
        }
        "search-by-location" | "search-by-user" => {
            assert_eq!(data["geofences"][0]["id"], fence, "{data}");
            assert_eq!(data["geofences"][0]["distance"], 0.0, "{data}");
        }
        "moving-geofences-create" => {
            assert!(is_id(&data["id"]), "{data}");
            assert_eq!(data["users"], json!([user]), "{data}");
            assert_eq!((&data["geometry_radius"], &data["is_enabled"]), (&json!(100), &json!(true)), "{data}");
        }
        "moving-geofences-update" => {
            assert_eq!(data["id"], fence, "{data}");
            assert_eq!(data["description"], "Escort of driver 7 (night)", "{data}");
            assert_eq!(data["is_enabled"], false, "{data}");
        }
        "moving-geofences-list" => {
            let g = data["geofences"].as_array().expect("list").iter().find(|g| g["id"] == fence);
            assert_eq!(g.map(|g| &g["counts"]), Some(&json!({"events": 0, "users": 0})), "{data}");
            assert_eq!(data["users"], json!([user]), "{data}");
        }
        "moving-geofences-delete" => assert_eq!(data, &json!({}), "{data}"),

        // Insights: the routine has a home and an office (weekdays) and a café (alternate evenings).
        "insights-home" | "insights-work" | "insights-poi" => {
            let key = match name {
                "insights-home" => "home",
                "insights-work" => "work",
                _ => "insights",
            };
            assert_eq!(data["user_id"], user, "{data}");
            let list = data[key].as_array().unwrap_or_else(|| panic!("{name}: data.{key} is not an array: {data}"));
            assert!(!list.is_empty(), "{name}: no {key} after three weeks of routine: {data}");
            let want = match name {
                "insights-home" => HOME,
                "insights-work" => OFFICE,
                _ => CAFE,
            };
            assert!(list.iter().any(|i| near(i, want)), "{name}: none at {want:?}: {data}");
        }

        // Tracking: what the page shows, and no ids.
        "tracking-page" | "tracking-data" | "tracking-gpx" => {
            let text = data.as_str().map_or_else(|| data.to_string(), str::to_owned);
            if name == "tracking-gpx" {
                assert!(text.contains("version=\"1.1\"") && text.contains("<trkpt"), "{name}: {text}");
            }
            for secret in [user, trip, fx.project.project_id.as_str()] {
                assert!(!text.contains(secret), "{name} shows {secret}: {text}");
            }
        }
        "tracking-asset" => assert!(data.as_str().is_some_and(|js| js.contains("Leaflet")), "leaflet.js"),
        // The console's page holds nothing of a project: it asks the API once signed in.
        "console-page" => {
            let html = data.as_str().expect("page");
            assert!(!html.contains(&fx.project.project_id) && !html.contains(user), "{name}: {html}");
        }
        "console-asset" => assert!(data.as_str().is_some_and(|js| js.contains("pm")), "leaflet-geoman.js"),

        // Webhooks: the secret is shown when it is made (create, rotation) and never again.
        "webhooks-create" | "webhooks-rotate-secret" => {
            if name == "webhooks-create" {
                assert!(is_id(&data["webhook_id"]), "{data}");
                assert_eq!(data["url"], "https://hooks.example.com/waymark", "{data}");
                assert_eq!(data["enabled"], true, "{data}");
            } else {
                assert_eq!(data["webhook_id"], webhook, "{data}");
            }
            assert!(data["secret"].as_str().is_some_and(|s| s.starts_with("whsec_")), "{data}");
        }
        "webhooks-list" => {
            let list = data["webhooks"].as_array().expect("webhooks");
            assert!(list.iter().any(|w| w["webhook_id"] == webhook && w.get("secret").is_none()), "{data}");
        }
        "webhooks-get" => {
            assert_eq!(data["webhook_id"], webhook, "{data}");
            assert!(data.get("secret").is_none(), "the secret is not shown again: {data}");
        }
        "webhooks-update" => {
            assert_eq!(data["webhook_id"], webhook, "{data}");
            assert_eq!(data["events"], json!(["*"]), "{data}");
            assert_eq!(data["description"], "Dispatch board (all events)", "{data}");
        }
        "webhooks-delete" => assert_eq!(data, &json!({"webhook_id": webhook}), "{data}"),
        "webhooks-test" => {
            assert_eq!(data["webhook_id"], webhook, "{data}");
            assert!(is_id(&data["event_id"]), "{data}");
        }
        "webhooks-deliveries" => {
            let d = &data["deliveries"][0];
            assert_eq!((&d["event_id"], &d["event_type"]), (&json!(event), &json!("webhook.test")), "{data}");
            assert_eq!(d["status"], "pending", "{data}");
        }
        "webhooks-replay" => assert_eq!(data, &json!({"webhook_id": webhook, "queued": 1}), "{data}"),
        other => panic!("no data check for {other}"),
    }
}

/// What an event must have changed, seen through the functions' own events (after its DynamoDB
/// actions were taken, so these reads do not count towards them).
pub(super) async fn check_effect(name: &str, fx: &Fixture) {
    let name = v3_name(name);
    let name = name.as_str();
    let fence = fx.geofence_id.as_deref().unwrap_or("(no geofence)");
    match name {
        "geofences-v1-delete-query" | "geofences-v1-delete-body" | "geofences-v3-delete-array" => {
            let body = fx.ok("geofences-v1-list", V1(200)).await;
            assert_eq!(body["data"]["geofences"], json!([]), "{name}: {body}");
        }
        "moving-geofences-delete" => {
            let body = fx.ok("moving-geofences-list", V1(200)).await;
            assert_eq!(body["data"]["geofences"], json!([]), "{name}: {body}");
        }
        "webhooks-delete" => {
            let body = fx.ok("webhooks-list", V1(200)).await;
            assert_eq!(body["data"]["webhooks"], json!([]), "{name}: {body}");
        }
        "locations-ingest-fenced" => {
            // The setup's history entered the fence and the other user's moving fence; this batch
            // left both.
            let body = fx.ok("geofences-events-list", V1(200)).await;
            let mut seen: Vec<(bool, &str)> = body["data"]["events"]
                .as_array()
                .expect("events")
                .iter()
                .map(|e| (e["geofence_id"] == fence, e["event_type"].as_str().expect("event_type")))
                .collect();
            seen.sort();
            let want = [
                (false, "motion:geofence:entry"),
                (false, "motion:geofence:exit"),
                (true, "motion:geofence:entry"),
                (true, "motion:geofence:exit"),
            ];
            assert_eq!(seen, want, "{name}: (the static fence?, event) of the user: {body}");
        }
        _ => {}
    }
}
// ---------------------------------------------------------------------------------------------
// The routine of `Setup::Routine`

/// The routine's places, (lng, lat).
const HOME: (f64, f64) = (13.4050, 52.5200);
const OFFICE: (f64, f64) = (13.3777, 52.5163);
const CAFE: (f64, f64) = (13.3950, 52.5250);

/// Monday to Friday (2024-04-01 to 04-05) in Berlin (UTC+1 then): home until 08:00 and from
/// 19:30 (from 18:00 on Tuesday and Thursday), the office 09:00-17:30, the café 18:00-19:30 on
/// Monday, Wednesday and Friday; travel in between. A fix every 10 minutes, with
/// `timezone_offset` "+0100" and a few meters of deterministic jitter.
pub(super) fn routine() -> Vec<Value> {
    let monday = chrono::NaiveDate::from_ymd_opt(2024, 4, 1).expect("date");
    let mut out = Vec::new();
    for d in 0..19 {
        let day = monday + Duration::days(d);
        let weekend = d % 7 >= 5;
        let cafe = d % 2 == 0 && !weekend;
        for step in 0..24 * 6 {
            let minute = step * 10;
            let h = minute as f64 / 60.0;
            let place = match h {
                _ if weekend => Some(HOME),
                h if h < 8.0 => Some(HOME),
                h if (9.0..17.5).contains(&h) => Some(OFFICE),
                h if cafe && (18.0..19.5).contains(&h) => Some(CAFE),
                h if h >= 19.5 || (!cafe && h >= 18.0) => Some(HOME),
                _ => None,
            };
            // Travel: south of the places, a different point every fix (no stay).
            let (lng, lat) = place.unwrap_or((13.3700 + (step % 12) as f64 * 0.003, 52.5050));
            let jitter = ((step * 7 + d * 13) % 11) as f64 - 5.0; // -5..5
            let (lng, lat) = (lng + jitter * 0.000_01, lat + jitter * 0.000_007);
            let local = day.and_hms_opt(0, 0, 0).expect("midnight") + Duration::minutes(minute);
            let at = local - Duration::hours(1);
            out.push(json!({
                "coordinates": [lng, lat],
                "recorded_at": at.format("%Y-%m-%dT%H:%M:%S%.3f").to_string(),
                "accuracy": 10.0,
                "timezone_offset": "+0100",
            }));
        }
    }
    out
}

/// Whether an insight's geometry (a ring around the place) holds `p`.
fn near(insight: &Value, p: (f64, f64)) -> bool {
    let Some(ring) = insight["geometry"]["coordinates"][0].as_array() else { return false };
    let (xs, ys): (Vec<f64>, Vec<f64>) =
        ring.iter().map(|c| (c[0].as_f64().unwrap_or(f64::NAN), c[1].as_f64().unwrap_or(f64::NAN))).unzip();
    let within = |v: &[f64], x: f64| {
        v.iter().copied().fold(f64::MAX, f64::min) <= x && x <= v.iter().copied().fold(f64::MIN, f64::max)
    };
    within(&xs, p.0) && within(&ys, p.1)
}
