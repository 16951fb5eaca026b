//! Project settings: one small record per project (`<project>#SETTINGS`). Each setting is
//! optional in the record, so a setting added later reads as its default in projects stored
//! before it. To add one: a field in [`StoredSettings`], its default and bounds beside
//! [`TRACKING_LINK_TTL`], an arm in [`SettingsUpdate::parse`], a line in [`ProjectSettings`].
//! `retention_days` is copied in the same transaction into the registry the retention sweeper
//! reads. Hot paths read through [`cached`] (once per [`CACHE_SECONDS`] per process); the GET and
//! the sweeper read the record itself ([`get`]). See docs/endpoints.md, "Retention".

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::project::Project;
use crate::store::{Cond, Store, Table, WriteOp, from_item, to_item};
use crate::time::Timestamp;
use crate::ttl_cache::TtlCache;

/// Hours a trip's tracking link keeps working after the trip ends: default and bounds (a year at
/// most; 0 closes the link as the trip ends).
pub const TRACKING_LINK_TTL_DEFAULT_HOURS: u32 = 24;
pub const TRACKING_LINK_TTL: std::ops::RangeInclusive<u32> = 0..=8760;
/// Days locations and geofence events are kept (by the time they were recorded). Absent (null)
/// keeps them for ever, the default; at most ten years.
pub const RETENTION_DAYS: std::ops::RangeInclusive<u32> = 1..=3650;

/// The settings as stored: only what a project has set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct StoredSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tracking_link_ttl_hours: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    retention_days: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    updated_at: Option<Timestamp>,
}

/// A project's settings, defaults filled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProjectSettings {
    pub tracking_link_ttl_hours: u32,
    /// None keeps locations and events for ever.
    pub retention_days: Option<u32>,
}

impl From<&StoredSettings> for ProjectSettings {
    fn from(s: &StoredSettings) -> Self {
        Self {
            tracking_link_ttl_hours: s.tracking_link_ttl_hours.unwrap_or(TRACKING_LINK_TTL_DEFAULT_HOURS),
            retention_days: s.retention_days,
        }
    }
}

impl ProjectSettings {
    pub fn to_json(self) -> Value {
        json!({"tracking_link_ttl_hours": self.tracking_link_ttl_hours, "retention_days": self.retention_days})
    }
}

/// How long a process trusts a project's settings it has read (seconds): short, so that a change
/// reaches every Lambda instance within a minute, and long enough that ingest reads them about
/// once a minute rather than once a batch.
pub const CACHE_SECONDS: u64 = 60;
/// Projects a process remembers before it starts over (one read each again).
const CACHE_PROJECTS: usize = 10_000;

/// The process's cache of projects' settings (see the module's documentation): an entry is
/// trusted for [`CACHE_SECONDS`] after it was read; this process's own change replaces it.
static CACHE: TtlCache<String, ProjectSettings> = TtlCache::new(Duration::from_secs(CACHE_SECONDS), CACHE_PROJECTS);

/// A project's settings as this process read them at most [`CACHE_SECONDS`] ago.
pub async fn cached(store: &dyn Store, project_id: &str) -> Result<ProjectSettings, ApiError> {
    if let Some(s) = CACHE.get(&project_id.to_owned()) {
        return Ok(s);
    }
    let s = get(store, project_id).await?;
    CACHE.put(project_id.to_owned(), s);
    Ok(s)
}

fn settings_pk(project_id: &str) -> String {
    [project_id, "#SETTINGS"].concat()
}
const SETTINGS_SK: &str = "-";

async fn stored(store: &dyn Store, project_id: &str) -> Result<StoredSettings, ApiError> {
    let item = store.get(Table::Main, &settings_pk(project_id), SETTINGS_SK).await?;
    Ok(item.map(from_item).transpose()?.unwrap_or_default())
}

/// The settings of a project (taken from an authenticated key or a stored record, never from
/// request input).
pub async fn get(store: &dyn Store, project_id: &str) -> Result<ProjectSettings, ApiError> {
    Ok(ProjectSettings::from(&stored(store, project_id).await?))
}

/// A change of settings: the fields given, each checked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SettingsUpdate {
    tracking_link_ttl_hours: Option<u32>,
    /// Some(None): back to keeping for ever.
    retention_days: Option<Option<u32>>,
}

impl SettingsUpdate {
    /// Parse a request body; an unknown field or a value out of bounds is a 400 naming it.
    pub fn parse(body: &Map<String, Value>) -> Result<Self, ApiError> {
        let mut up = Self::default();
        for (k, v) in body {
            match k.as_str() {
                "tracking_link_ttl_hours" => {
                    let (lo, hi) = (TRACKING_LINK_TTL.start(), TRACKING_LINK_TTL.end());
                    let n = v
                        .as_u64()
                        .and_then(|n| u32::try_from(n).ok())
                        .filter(|n| TRACKING_LINK_TTL.contains(n))
                        .ok_or_else(|| {
                            ApiError::field(k, format!("{v} is not a whole number of hours from {lo} to {hi}"))
                        })?;
                    up.tracking_link_ttl_hours = Some(n);
                }
                "retention_days" => {
                    let (lo, hi) = (RETENTION_DAYS.start(), RETENTION_DAYS.end());
                    let n = match v {
                        Value::Null => None,
                        v => Some(
                            v.as_u64()
                                .and_then(|n| u32::try_from(n).ok())
                                .filter(|n| RETENTION_DAYS.contains(n))
                                .ok_or_else(|| {
                                    ApiError::field(
                                        k,
                                        format!("{v} is not null (keep for ever) or a whole number of days from {lo} to {hi}"),
                                    )
                                })?,
                        ),
                    };
                    up.retention_days = Some(n);
                }
                other => {
                    return Err(ApiError::field(
                        other,
                        "is not a project setting; known: tracking_link_ttl_hours, retention_days",
                    ));
                }
            }
        }
        Ok(up)
    }
}

/// Apply `up` to the project's settings. A last-writer-wins put: settings are independent
/// values, and each update names the ones it changes (read, merge, write).
pub async fn update(store: &dyn Store, p: &Project, up: SettingsUpdate) -> Result<ProjectSettings, ApiError> {
    let mut s = stored(store, &p.project_id).await?;
    if let Some(h) = up.tracking_link_ttl_hours {
        s.tracking_link_ttl_hours = Some(h);
    }
    if let Some(d) = up.retention_days {
        s.retention_days = d;
    }
    s.updated_at = Some(Timestamp::now());
    let mut ops = vec![WriteOp::Put {
        table: Table::Main,
        item: to_item(&settings_pk(&p.project_id), SETTINGS_SK, &s)?,
        cond: Cond::None,
    }];
    // The sweeper's registry changes with the setting (in one transaction, so neither can be
    // left behind the other); only when the request names it, so other settings cost no write.
    if let Some(d) = up.retention_days {
        ops.push(WriteOp::Put { table: Table::Main, item: registry_item(p, d)?, cond: Cond::None });
    }
    store.transact(ops).await?;
    let now = ProjectSettings::from(&s);
    CACHE.put(p.project_id.clone(), now);
    Ok(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: Value) -> Result<SettingsUpdate, ApiError> {
        SettingsUpdate::parse(v.as_object().unwrap())
    }

    #[test]
    fn ttl_is_checked_and_named() {
        assert_eq!(parse(json!({"tracking_link_ttl_hours": 48})).unwrap().tracking_link_ttl_hours, Some(48));
        assert_eq!(parse(json!({"tracking_link_ttl_hours": 0})).unwrap().tracking_link_ttl_hours, Some(0));
        for bad in [json!(-1), json!(8761), json!(1.5), json!("24"), json!(null), json!(u64::MAX)] {
            let e = parse(json!({"tracking_link_ttl_hours": bad})).unwrap_err();
            assert!(e.msg.starts_with("tracking_link_ttl_hours: "), "{bad}: {}", e.msg);
        }
        let e = parse(json!({"retention_day": 3})).unwrap_err();
        assert!(e.msg.starts_with("retention_day: "), "{}", e.msg);
        assert_eq!(parse(json!({"retention_days": 30})).unwrap().retention_days, Some(Some(30)));
        assert_eq!(parse(json!({"retention_days": null})).unwrap().retention_days, Some(None));
        for bad in [json!(0), json!(-1), json!(1.5), json!("x"), json!(3651), json!(true)] {
            let e = parse(json!({"retention_days": bad})).unwrap_err();
            assert!(e.msg.starts_with("retention_days: "), "{bad}: {}", e.msg);
        }
        let e = parse(json!({"retention_day": 3})).unwrap_err();
        assert!(e.msg.starts_with("retention_day: "), "{}", e.msg);
        assert_eq!(parse(json!({})).unwrap(), SettingsUpdate::default());
    }

    #[test]
    fn defaults_fill_what_is_not_stored() {
        assert_eq!(ProjectSettings::from(&StoredSettings::default()).tracking_link_ttl_hours, 24);
    }
}

/// The retention sweeper's registry: one item per project that has (or had) retention, written
/// with the setting, so the sweep (`pipeline::retention`) finds them without a scan.
pub(crate) const RETENTION_REGISTRY_PK: &str = "RETENTION";

/// A project's entry in the sweeper's registry. A project that went back to keeping for ever
/// keeps its entry with `retention_days: null` (a put, like every settings write).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Registered {
    pub project_id: String,
    pub retention_days: Option<u32>,
}

/// The registry item for `p` with this retention (written with the setting).
fn registry_item(p: &Project, days: Option<u32>) -> Result<crate::store::Item, ApiError> {
    let r = Registered { project_id: p.project_id.clone(), retention_days: days };
    Ok(to_item(RETENTION_REGISTRY_PK, &p.project_id, &r)?)
}

/// A project's `retention_days`, through the settings cache ([`cached`]).
pub async fn retention_days(store: &dyn Store, project_id: &str) -> Result<Option<u32>, ApiError> {
    Ok(cached(store, project_id).await?.retention_days)
}

/// Whether things recorded at `since` may have expired in this project (so figures computed
/// from its fixes now would be computed from part of them).
pub async fn may_have_expired(store: &dyn Store, project_id: &str, since: Timestamp) -> Result<bool, ApiError> {
    let days = retention_days(store, project_id).await?;
    Ok(days.is_some_and(|d| since < crate::expiry::cutoff(d, Timestamp::now())))
}
