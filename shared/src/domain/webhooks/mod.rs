//! Webhooks, following the Standard Webhooks specification (<https://www.standardwebhooks.com>):
//! endpoints a project subscribes (`<project>#WH`, sort key webhook id), an outbox of messages
//! written in the same step as the events they carry ([`outbox`]), and a delivery worker that
//! signs, sends and retries them ([`deliver`]).
//!
//! Event types and the events API names they come from (docs/events.md, "Webhooks"):
//! `location.updated` (one per processed range of a user's new fixes, with the newest fix),
//! `geofence.entry|exit|dwell` (`motion:geofence:*`), `trip.created` (`service:trip:created`),
//! `trip.started|paused|resumed` (`trip:started|paused|resumed`), `trip.ended`
//! (`trip:completed`), `trip.origin_reached|origin_left`, `trip.stop_arrived|stop_departed`,
//! `trip.destination_reached|destination_left` (`trip:user_*`), `webhook.test`.

pub mod deliver;
mod logbook;
pub mod outbox;
pub mod stored_body;

use std::net::IpAddr;

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::domain::users::User;
use crate::error::ApiError;
use crate::ids::{is_id, new_id};
use crate::metadata::check_text;
use crate::project::Project;
use crate::store::{Cond, Query, SkRange, Store, StoreError, Table, from_item, to_item};
use crate::time::Timestamp;
use crate::ttl_cache::ProjectCache;

/// Every event type an endpoint may subscribe to.
pub const EVENT_TYPES: &[&str] = &[
    "location.updated",
    "geofence.entry",
    "geofence.exit",
    "geofence.dwell",
    "trip.created",
    "trip.started",
    "trip.paused",
    "trip.resumed",
    "trip.ended",
    "trip.origin_reached",
    "trip.origin_left",
    "trip.stop_arrived",
    "trip.stop_departed",
    "trip.destination_reached",
    "trip.destination_left",
    "webhook.test",
];
/// Most endpoints of one project.
pub const MAX_ENDPOINTS: usize = 20;
/// Longest endpoint URL.
pub const MAX_URL: usize = 2048;
/// After a rotation the previous secret keeps signing this long (seconds).
pub const ROTATION_OVERLAP_SECONDS: i64 = 24 * 3600;

/// An event as it is sent: `{id, type, created_at, project_id, data}` (the project is added at
/// enqueue time). `id` is the event's id in the events API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookEvent {
    pub id: String,
    pub kind: &'static str,
    pub user_id: Option<String>,
    pub created_at: Timestamp,
    pub data: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Secret {
    pub value: String,
    /// Set on a rotated-out secret: it signs until then.
    pub expires_at: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Endpoint {
    pub id: String,
    pub project_id: String,
    pub url: String,
    pub events: Vec<String>,
    pub description: Option<String>,
    pub enabled: bool,
    /// Why the worker disabled it (cleared when it is enabled again).
    pub disabled_reason: Option<String>,
    pub secrets: Vec<Secret>,
    /// Start of the current run of failed attempts (none since the last success).
    pub failing_since: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub version: u64,
}

impl Endpoint {
    /// Whether events of `kind` go to this endpoint (a test event goes whatever it subscribes to).
    pub fn wants(&self, kind: &str) -> bool {
        kind == "webhook.test" || self.events.iter().any(|e| e == "*" || e == kind)
    }
    /// The secrets that sign now: the current one, and a rotated-out one until it expires.
    pub fn signing_secrets(&self, now: Timestamp) -> Vec<&str> {
        self.secrets.iter().filter(|s| s.expires_at.is_none_or(|t| t > now)).map(|s| s.value.as_str()).collect()
    }
}

pub(crate) fn endpoints_pk(pid: &str) -> String {
    [pid, "#WH"].concat()
}

/// `whsec_` and the base64 of 32 random bytes (the spec asks for 24 to 64).
fn new_secret() -> String {
    let bytes: [u8; 32] = rand::random();
    format!("whsec_{}", base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// `POST /v1/api/webhooks/` body.
#[derive(Debug, Deserialize)]
pub struct CreateEndpoint {
    pub url: String,
    pub events: Vec<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default = "yes")]
    pub enabled: bool,
}
fn yes() -> bool {
    true
}

/// `PUT /v1/api/webhooks/` body: absent fields are unchanged.
#[derive(Debug, Deserialize)]
pub struct UpdateEndpoint {
    pub webhook_id: String,
    pub url: Option<String>,
    pub events: Option<Vec<String>>,
    pub description: Option<String>,
    pub enabled: Option<bool>,
}

/// Whether `ip` may receive webhooks: not loopback, private, link-local (cloud metadata at
/// 169.254.169.254 included), unspecified, multicast, shared or documentation space.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || o[0] == 0
                || (o[0] == 100 && (64..128).contains(&o[1])) // shared address space (RFC 6598)
                || (o[0] == 198 && (o[1] == 18 || o[1] == 19)) // benchmarking (RFC 2544)
                || o[0] >= 240)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let s = v6.segments();
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00 // unique local
                || (s[0] & 0xffc0) == 0xfe80 // link-local
                || (s[0] == 0xfd00 && s[1] == 0x0ec2)) // AWS metadata over IPv6 (fd00:ec2::254)
        }
    }
}

/// Whether `http` and private addresses are allowed (env `WAYMARK_WEBHOOK_ALLOW_PRIVATE=1`; for
/// local development and tests only).
pub fn allow_private(env: &crate::config::Env) -> bool {
    env.get("WAYMARK_WEBHOOK_ALLOW_PRIVATE") == Some("1")
}

/// A URL an endpoint may have: absolute `https` (or `http` when private targets are allowed), a
/// host, no credentials, and a host that is not a private address literal nor `localhost`.
/// Names are resolved and checked again at every delivery (DNS rebinding).
pub fn check_url(field: &str, raw: &str, allow_private: bool) -> Result<String, ApiError> {
    if raw.len() > MAX_URL {
        return Err(ApiError::field(field, format!("at most {MAX_URL} characters")));
    }
    let url = url::Url::parse(raw.trim()).map_err(|e| ApiError::field(field, format!("not an absolute URL ({e})")))?;
    match url.scheme() {
        "https" => {}
        "http" if allow_private => {}
        other => return Err(ApiError::field(field, format!("must be an https URL, not {other}"))),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(ApiError::field(field, "must not carry a user name or password"));
    }
    let private = match url.host() {
        None => return Err(ApiError::field(field, "has no host")),
        Some(url::Host::Ipv4(ip)) => !is_public(IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => !is_public(IpAddr::V6(ip)),
        Some(url::Host::Domain(d)) => {
            let d = d.trim_end_matches('.').to_ascii_lowercase();
            d == "localhost" || d.ends_with(".localhost") || d == "metadata.google.internal"
        }
    };
    if private && !allow_private {
        return Err(ApiError::field(field, "must not point at a loopback, private, link-local or metadata address"));
    }
    Ok(url.to_string())
}

fn check_events(events: &[String]) -> Result<Vec<String>, ApiError> {
    if events.is_empty() {
        return Err(ApiError::field("events", "must name at least one event type, or [\"*\"] for all"));
    }
    for (i, e) in events.iter().enumerate() {
        if e != "*" && !EVENT_TYPES.contains(&e.as_str()) {
            return Err(ApiError::field(
                &format!("events[{i}]"),
                format!("'{e}' is not an event type; one of {} or *", EVENT_TYPES.join(", ")),
            ));
        }
    }
    let mut out = events.to_vec();
    out.sort();
    out.dedup();
    Ok(out)
}

/// The project's endpoints, all of them (a project has at most [`MAX_ENDPOINTS`]).
pub async fn list(store: &dyn Store, p: &Project) -> Result<Vec<Endpoint>, ApiError> {
    let items = store.query(Table::Main, &Query::new(endpoints_pk(&p.project_id), SkRange::All)).await?.items;
    Ok(items.into_iter().map(from_item).collect::<Result<_, _>>()?)
}

/// The endpoints that take events now (enabled); empty when the project has none, which lets
/// producers skip all webhook work.
pub async fn subscriptions(store: &dyn Store, p: &Project) -> Result<Vec<Endpoint>, ApiError> {
    let id = std::ptr::from_ref(store).cast::<()>() as usize;
    SUBSCRIPTIONS
        .get_or(id, &p.project_id, || async { Ok(list(store, p).await?.into_iter().filter(|e| e.enabled).collect()) })
        .await
}

/// How long an instance trusts the endpoints it read for [`subscriptions`] (seconds). Every pass
/// of every user reads them, so without the cache `<project>#WH` was one partition read by all
/// of a project's ingest (3,000 reads a second at most). A write forgets them on its own
/// instance at once (so `waymark serve`, the store's only writer, is exact); on AWS another
/// instance's passes see a new, changed or deleted endpoint within this time (docs/events.md).
pub const SUBSCRIPTIONS_CACHE_SECONDS: u64 = 10;
static SUBSCRIPTIONS: ProjectCache<Vec<Endpoint>> =
    ProjectCache::new(std::time::Duration::from_secs(SUBSCRIPTIONS_CACHE_SECONDS), 10_000);

/// After a write of one of the project's endpoints: this instance reads them again.
fn endpoints_changed(project_id: &str) {
    SUBSCRIPTIONS.changed(project_id);
}

pub async fn get(store: &dyn Store, p: &Project, id: &str) -> Result<Endpoint, ApiError> {
    let missing = || ApiError::not_found(format!("webhook_id: no webhook '{id}' in this project"));
    if !is_id(id) {
        return Err(missing());
    }
    let item = store.get(Table::Main, &endpoints_pk(&p.project_id), id).await?.ok_or_else(missing)?;
    Ok(from_item(item)?)
}

/// `allow_private`: see [`allow_private`] (the caller's configuration).
pub async fn create(
    store: &dyn Store,
    p: &Project,
    input: CreateEndpoint,
    allow_private: bool,
) -> Result<Endpoint, ApiError> {
    let url = check_url("url", &input.url, allow_private)?;
    let events = check_events(&input.events)?;
    check_text("description", &input.description)?;
    if list(store, p).await?.len() >= MAX_ENDPOINTS {
        return Err(ApiError::conflict(format!("a project has at most {MAX_ENDPOINTS} webhooks; delete one first")));
    }
    let now = Timestamp::now();
    let e = Endpoint {
        id: new_id(),
        project_id: p.project_id.clone(),
        url,
        events,
        description: input.description,
        enabled: input.enabled,
        disabled_reason: None,
        secrets: vec![Secret { value: new_secret(), expires_at: None }],
        failing_since: None,
        created_at: now,
        updated_at: now,
        version: 1,
    };
    let written = store.put(Table::Main, to_item(&endpoints_pk(&p.project_id), &e.id, &e)?, Cond::NotExists).await;
    // Also after an error: the write may have been applied.
    endpoints_changed(&p.project_id);
    written?;
    Ok(e)
}

/// Read-modify-write of one endpoint, checked on its version and retried on conflict.
pub async fn modify(
    store: &dyn Store,
    p: &Project,
    id: &str,
    change: impl Fn(&mut Endpoint) -> Result<(), ApiError>,
) -> Result<Endpoint, ApiError> {
    for _ in 0..20 {
        let mut e = get(store, p, id).await?;
        let expected = e.version;
        change(&mut e)?;
        e.version += 1;
        e.updated_at = Timestamp::now();
        let item = to_item(&endpoints_pk(&p.project_id), &e.id, &e)?;
        let written = store.put(Table::Main, item, Cond::Equals("version", expected.into())).await;
        endpoints_changed(&p.project_id);
        match written {
            Ok(()) => return Ok(e),
            Err(StoreError::ConditionFailed) => continue,
            Err(err) => return Err(err.into()),
        }
    }
    Err(ApiError::conflict(format!("webhook_id: webhook '{id}' is being changed by other requests; retry")))
}

pub async fn update(
    store: &dyn Store,
    p: &Project,
    input: UpdateEndpoint,
    allow_private: bool,
) -> Result<Endpoint, ApiError> {
    let url = input.url.as_deref().map(|u| check_url("url", u, allow_private)).transpose()?;
    let events = input.events.as_deref().map(check_events).transpose()?;
    check_text("description", &input.description)?;
    let endpoint = modify(store, p, &input.webhook_id, |e| {
        if let Some(u) = &url {
            e.url = u.clone();
        }
        if let Some(ev) = &events {
            e.events = ev.clone();
        }
        if let Some(d) = &input.description {
            e.description = Some(d.clone());
        }
        if let Some(on) = input.enabled {
            if on && !e.enabled {
                // Enabled again: forget the failures that disabled it.
                e.disabled_reason = None;
                e.failing_since = None;
            }
            e.enabled = on;
        }
        Ok(())
    })
    .await?;
    if endpoint.enabled && input.enabled == Some(true) {
        // The worker drops a disabled endpoint's marks once it has logged what waits for it:
        // a mark in every outbox shard brings its pending deliveries back (a shard with none
        // drops its mark at the first look).
        let marks = (0..outbox::OUTBOX_SHARDS).map(|s| outbox::work_mark(p, &endpoint.id, s));
        store.transact(marks.collect::<Result<_, _>>()?).await?;
    }
    Ok(endpoint)
}

pub async fn delete(store: &dyn Store, p: &Project, id: &str) -> Result<(), ApiError> {
    get(store, p, id).await?;
    let deleted = store.delete(Table::Main, &endpoints_pk(&p.project_id), id, Cond::None).await;
    endpoints_changed(&p.project_id);
    Ok(deleted?)
}

/// A new signing secret; the previous one keeps signing for [`ROTATION_OVERLAP_SECONDS`].
pub async fn rotate_secret(store: &dyn Store, p: &Project, id: &str) -> Result<Endpoint, ApiError> {
    let fresh = new_secret();
    modify(store, p, id, |e| {
        let now = Timestamp::now();
        let until = Timestamp(now.0 + chrono::Duration::seconds(ROTATION_OVERLAP_SECONDS));
        e.secrets.retain(|s| s.expires_at.is_none_or(|t| t > now));
        for s in e.secrets.iter_mut().filter(|s| s.expires_at.is_none()) {
            s.expires_at = Some(until);
        }
        e.secrets.insert(0, Secret { value: fresh.clone(), expires_at: None });
        Ok(())
    })
    .await
}

/// An endpoint as the API shows it; `secret` only when it was just made (create, rotation).
pub fn endpoint_json(e: &Endpoint, with_secret: bool) -> Value {
    let mut v = json!({
        "webhook_id": e.id, "url": e.url, "events": e.events, "description": e.description,
        "enabled": e.enabled, "disabled_reason": e.disabled_reason,
        "failing_since": e.failing_since.map(|t| t.format(None)),
        "created_at": e.created_at.format(None), "updated_at": e.updated_at.format(None),
    });
    if with_secret {
        v["secret"] = e.secrets.first().map(|s| s.value.clone()).into();
    }
    v
}

/// The user part of a payload: `user_id`, `description`, `metadata`.
pub fn user_brief(user: Option<&User>, user_id: Option<&str>) -> Value {
    match user {
        Some(u) => json!({"user_id": u.id, "description": u.description, "metadata": u.metadata}),
        None => json!({"user_id": user_id, "description": null, "metadata": null}),
    }
}
