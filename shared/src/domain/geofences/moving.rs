//! Moving geofences (v3): a circle around each followed user's latest location; another user of
//! the project who comes inside it causes `motion:geofence:entry`, leaving it `…:exit`.
//! Evaluated on each batch that moves a user's latest location: the user against every moving
//! fence following someone else, and, when the user is followed, everyone near them through the
//! index of latest positions by geohash cell (no scan). Moving fences are read whole on each
//! batch: a project is meant to have tens of them. See docs/geofences.md, "Moving geofences".

use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::events::GeofenceEvent;
use super::{GeometryType, check_color, index, parse_radius};
use crate::domain::list_pages;
use crate::domain::locations::Location;
use crate::domain::users::{self, User};
use crate::error::ApiError;
use crate::geometry::LngLat;
use crate::ids::{id_range, is_id, new_id};
use crate::metadata;
use crate::paging::{Order, PageInfo, PageNumber};
use crate::project::Project;
use crate::store::{Cond, Query, SkRange, Store, StoreError, Table, WriteOp, from_item, from_jsons, get_as, to_item};
use crate::time::{DateRange, Timestamp};

/// Most users one moving fence follows.
pub const MAX_USERS: usize = 100;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MovingGeofence {
    pub id: String,
    pub project_id: String,
    pub account_id: String,
    pub radius_m: u32,
    pub users: Vec<String>,
    pub only_once: bool,
    pub description: Option<String>,
    pub tag: Option<String>,
    pub color_code: Option<String>,
    pub metadata: Option<Map<String, Value>>,
    pub is_enabled: bool,
    pub is_deleted: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub version: u64,
}

pub(crate) fn fences_pk(pid: &str) -> String {
    [pid, "#MF"].concat()
}
pub(crate) fn deleted_pk(pid: &str) -> String {
    [pid, "#MFD"].concat()
}
pub(crate) fn pair_pk(pid: &str, fid: &str) -> String {
    [pid, "#MS#", fid].concat()
}
pub(crate) fn user_cell_pk(pid: &str, cell: &str) -> String {
    [pid, "#UC#", cell].concat()
}

#[derive(Debug, Deserialize)]
pub struct CreateMoving {
    pub users: Vec<String>,
    /// Only `circle`; may be left out.
    #[serde(default)]
    pub geometry_type: Option<String>,
    pub geometry_radius: Option<Value>,
    #[serde(default)]
    pub only_once: bool,
    #[serde(default)]
    pub metadata: Option<Map<String, Value>>,
    #[serde(default)]
    pub color_code: Option<String>,
    #[serde(default)]
    pub tag: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub is_enabled: bool,
}

pub async fn create(store: &dyn Store, p: &Project, input: CreateMoving) -> Result<MovingGeofence, ApiError> {
    if let Some(t) = input.geometry_type.as_deref().filter(|t| !t.trim().is_empty())
        && GeometryType::parse("geometry_type", t)? != GeometryType::Circle
    {
        return Err(ApiError::field("geometry_type", "a moving geofence is a circle"));
    }
    let radius_m = parse_radius(input.geometry_radius.as_ref())?;
    check_color(&input.color_code)?;
    crate::metadata::check_text("tag", &input.tag)?;
    crate::metadata::check_text("description", &input.description)?;
    if let Some(m) = &input.metadata {
        metadata::validate("metadata", m)?;
    }
    let mut followed = input.users.clone();
    followed.sort();
    followed.dedup();
    if followed.is_empty() || followed.len() > MAX_USERS {
        return Err(ApiError::field("users", format!("must name 1 to {MAX_USERS} users")));
    }
    let mut unknown = Vec::new();
    for u in &followed {
        if users::record(store, p, u).await?.is_none() {
            unknown.push(u.as_str());
        }
    }
    if !unknown.is_empty() {
        return Err(ApiError::not_found(format!("users: no such user in this project: {}", unknown.join(", "))));
    }
    let now = Timestamp::now();
    let g = MovingGeofence {
        id: new_id(),
        project_id: p.project_id.clone(),
        account_id: p.account_id.clone(),
        radius_m,
        users: followed,
        only_once: input.only_once,
        description: input.description,
        tag: input.tag,
        color_code: input.color_code,
        metadata: input.metadata,
        is_enabled: input.is_enabled,
        is_deleted: false,
        created_at: now,
        updated_at: now,
        version: 1,
    };
    // Counted for the list's pages in the same transaction.
    let written = list_pages::insert(store, Table::Main, to_item(&fences_pk(&p.project_id), &g.id, &g)?).await;
    fences_changed(&p.project_id);
    written?;
    Ok(g)
}

pub async fn get(store: &dyn Store, p: &Project, id: &str) -> Result<MovingGeofence, ApiError> {
    let missing = || ApiError::not_found(format!("geofence_id: no moving geofence '{id}' in this project"));
    if !is_id(id) {
        return Err(missing());
    }
    get_as(store, Table::Main, &fences_pk(&p.project_id), id).await?.ok_or_else(missing)
}

pub async fn update(
    store: &dyn Store,
    p: &Project,
    id: &str,
    up: super::UpdateGeofence,
) -> Result<MovingGeofence, ApiError> {
    up.validate()?;
    if let Some(f) = up.static_only_fields().first() {
        return Err(ApiError::field(
            f,
            "a moving geofence is a circle around its users: only geometry_radius can change",
        ));
    }
    let radius = up.geometry_radius.as_ref().map(|r| parse_radius(Some(r))).transpose()?;
    for _ in 0..20 {
        let mut g = get(store, p, id).await?;
        let expected = g.version;
        if let Some(r) = radius {
            g.radius_m = r;
        }
        up.apply(super::FenceFields {
            metadata: &mut g.metadata,
            color_code: &mut g.color_code,
            tag: &mut g.tag,
            description: &mut g.description,
            is_enabled: &mut g.is_enabled,
        });
        g.version += 1;
        g.updated_at = Timestamp::now();
        let item = to_item(&fences_pk(&p.project_id), &g.id, &g)?;
        let written = store.put(Table::Main, item, Cond::Equals("version", expected.into())).await;
        fences_changed(&p.project_id);
        match written {
            Ok(()) => return Ok(g),
            Err(StoreError::ConditionFailed) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::conflict("geofence_id: the geofence is being changed by other requests; retry"))
}

pub async fn delete(store: &dyn Store, p: &Project, id: &str) -> Result<(), ApiError> {
    let mut g = get(store, p, id).await?;
    let expected = g.version;
    g.is_deleted = true;
    g.updated_at = Timestamp::now();
    let mut ops = vec![
        WriteOp::Delete {
            table: Table::Main,
            pk: fences_pk(&p.project_id),
            sk: g.id.clone(),
            cond: Cond::Equals("version", expected.into()),
        },
        WriteOp::Put { table: Table::Main, item: to_item(&deleted_pk(&p.project_id), &g.id, &g)?, cond: Cond::None },
    ];
    ops.extend(list_pages::count_ops(Table::Main, &fences_pk(&p.project_id), &g.id, -1));
    let written = store.transact(ops).await;
    fences_changed(&p.project_id);
    match written {
        Ok(()) => Ok(()),
        Err(StoreError::ConditionFailed) => {
            Err(ApiError::conflict("geofence_id: the geofence changed meanwhile; retry"))
        }
        Err(e) => Err(e.into()),
    }
}

pub async fn list(
    store: &dyn Store,
    p: &Project,
    range: DateRange,
    page: PageNumber,
) -> Result<(Vec<MovingGeofence>, PageInfo), ApiError> {
    let pk = fences_pk(&p.project_id);
    let (docs, info) =
        list_pages::page(store, Table::Main, &pk, Some(id_range(&range)), page, Order::NewestFirst).await?;
    Ok((from_jsons(&docs)?, info))
}

pub fn moving_json(g: &MovingGeofence) -> Value {
    json!({
        "id": g.id, "account_id": g.account_id, "project_id": g.project_id,
        "geometry_type": "circle", "geometry_radius": g.radius_m,
        "is_enabled": g.is_enabled, "is_deleted": g.is_deleted,
        "created_at": g.created_at.format(None), "updated_at": g.updated_at.format(None),
        "only_once": g.only_once, "users": g.users,
        "description": g.description, "tag": g.tag, "color_code": g.color_code,
        "metadata": g.metadata.clone().unwrap_or_default(),
    })
}

/// A user's latest position in the cell index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Position {
    pub user_id: String,
    pub location_id: String,
    pub coordinates: LngLat,
    pub recorded_at: Timestamp,
    geofence_events: bool,
}

/// State of a (followed, other) pair of one moving fence.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Pair {
    inside: bool,
    /// The pair has entered at least once (for `only_once`).
    entered: bool,
    /// This visit's entry was reported, so its exit will be.
    reported: bool,
}

/// Index writes that keep the user-position index current when the user's latest location
/// moves from `before` to `after` (states, written in the processor's transaction).
pub fn reindex_ops(
    p: &Project,
    user: &User,
    after: &Location,
    before: Option<&Location>,
) -> Result<Vec<WriteOp>, ApiError> {
    let Ok(cell) = index::cell_of(after.coordinates) else { return Ok(Vec::new()) };
    let pos = Position {
        user_id: user.id.clone(),
        location_id: after.id.clone(),
        coordinates: after.coordinates,
        recorded_at: after.recorded_at,
        geofence_events: user.geofence_events,
    };
    let mut ops = vec![WriteOp::Put {
        table: Table::Main,
        item: to_item(&user_cell_pk(&p.project_id, &cell), &user.id, &pos)?,
        cond: Cond::None,
    }];
    if let Some(old) = before.and_then(|b| index::cell_of(b.coordinates).ok()).filter(|c| *c != cell) {
        ops.push(WriteOp::Delete {
            table: Table::Main,
            pk: user_cell_pk(&p.project_id, &old),
            sk: user.id.clone(),
            cond: Cond::None,
        });
    }
    Ok(ops)
}

/// Users whose latest position is within `radius_m` of `at`, with their distances in meters,
/// from the cell index (moving fences and the nearby users search). The cells are read
/// concurrently, a bounded number at a time.
pub async fn near(store: &dyn Store, p: &Project, at: LngLat, radius_m: f64) -> Result<Vec<(Position, f64)>, ApiError> {
    let Ok(cells) = index::search_cells(at, radius_m) else { return Ok(Vec::new()) };
    let pages: Vec<_> =
        futures::stream::iter(cells)
            .map(|c| async move {
                store.query(Table::Main, &Query::new(user_cell_pk(&p.project_id, &c), SkRange::All)).await
            })
            .buffer_unordered(index::CELL_READS_IN_FLIGHT)
            .try_collect()
            .await?;
    let mut out = Vec::new();
    for item in pages.into_iter().flat_map(|page| page.items) {
        let pos: Position = from_item(item)?;
        let d = at.distance_m(pos.coordinates);
        if d <= radius_m {
            out.push((pos, d));
        }
    }
    Ok(out)
}

/// Users whose latest position is in `cells` (of the index's precision), each with its cell,
/// read concurrently a bounded number at a time, each cell's users in id order, cells in the
/// order given.
pub async fn in_cells(store: &dyn Store, p: &Project, cells: &[String]) -> Result<Vec<(String, Position)>, ApiError> {
    let queries: Vec<Query> = cells.iter().map(|c| Query::new(user_cell_pk(&p.project_id, c), SkRange::All)).collect();
    let pages: Vec<_> = futures::stream::iter(queries)
        .map(|q| async move { store.query(Table::Main, &q).await })
        .buffered(index::CELL_READS_IN_FLIGHT)
        .try_collect()
        .await?;
    let mut out = Vec::new();
    for (cell, page) in cells.iter().zip(pages) {
        for item in page.items {
            out.push((cell.clone(), from_item(item)?));
        }
    }
    Ok(out)
}

/// What the user's move to `at` does to moving fences: pair states to write and events fired
/// (each with its fence).
#[derive(Default)]
pub struct MovingPlan {
    pub states: Vec<WriteOp>,
    pub events: Vec<(GeofenceEvent, MovingGeofence)>,
}

/// Evaluate moving fences for `user`, whose latest location is now `at`.
/// How long an instance trusts the project's moving fences it read for a pass (seconds): every
/// pass of every user reads them, so uncached `<project>#MF` was one partition read by all of a
/// project's ingest. A write forgets them on its own instance at once (`waymark serve` is
/// exact); on AWS other instances' passes see a change within this time (docs/geofences.md).
pub const ENABLED_CACHE_SECONDS: u64 = 10;
static ENABLED: crate::ttl_cache::ProjectCache<Vec<MovingGeofence>> =
    crate::ttl_cache::ProjectCache::new(std::time::Duration::from_secs(ENABLED_CACHE_SECONDS), 10_000);

/// After a write of one of the project's moving fences (also one whose outcome is unknown).
pub(crate) fn fences_changed(project_id: &str) {
    ENABLED.changed(project_id);
}

/// The project's enabled moving fences, through [`ENABLED`].
async fn enabled(store: &dyn Store, p: &Project) -> Result<Vec<MovingGeofence>, ApiError> {
    let id = std::ptr::from_ref(store).cast::<()>() as usize;
    ENABLED
        .get_or(id, &p.project_id, || async {
            let items = store.query(Table::Main, &Query::new(fences_pk(&p.project_id), SkRange::All)).await?.items;
            let all = items.into_iter().map(from_item).collect::<Result<Vec<MovingGeofence>, _>>()?;
            Ok::<_, ApiError>(all.into_iter().filter(|g| g.is_enabled).collect())
        })
        .await
}

pub async fn plan(store: &dyn Store, p: &Project, user: &User, at: &Location) -> Result<MovingPlan, ApiError> {
    let fences = enabled(store, p).await?;
    let me = Position {
        user_id: user.id.clone(),
        location_id: at.id.clone(),
        coordinates: at.coordinates,
        recorded_at: at.recorded_at,
        geofence_events: user.geofence_events,
    };
    let mut out = MovingPlan::default();
    for g in &fences {
        let r = f64::from(g.radius_m);
        // (followed, other's position, inside now, when: the later of the two positions)
        let mut pairs: Vec<(String, Position, bool, Timestamp)> = Vec::new();
        for f in g.users.iter().filter(|f| **f != user.id) {
            if let Some(fpos) = users::get(store, p, f).await?.and_then(|u| u.last_location_update) {
                let inside = fpos.coordinates.distance_m(me.coordinates) <= r;
                pairs.push((f.clone(), me.clone(), inside, me.recorded_at.max(fpos.recorded_at)));
            }
        }
        if g.users.contains(&user.id) {
            let nearby: Vec<Position> = near(store, p, me.coordinates, r).await?.into_iter().map(|(n, _)| n).collect();
            let pk = pair_pk(&p.project_id, &g.id);
            let prefix = format!("{}#", user.id);
            for item in store.query(Table::Main, &Query::new(&pk, SkRange::Prefix(prefix.clone()))).await?.items {
                let other = item.get("sk").and_then(Value::as_str).unwrap_or("").trim_start_matches(&prefix).to_owned();
                if !nearby.iter().any(|n| n.user_id == other)
                    && let Some(o) = users::get(store, p, &other).await?
                {
                    let pos = Position {
                        user_id: o.id.clone(),
                        location_id: o.last_location_update.as_ref().map(|l| l.id.clone()).unwrap_or_default(),
                        coordinates: o.last_location_update.as_ref().map(|l| l.coordinates).unwrap_or(me.coordinates),
                        recorded_at: o.last_location_update.as_ref().map(|l| l.recorded_at).unwrap_or(me.recorded_at),
                        geofence_events: o.geofence_events,
                    };
                    let when = me.recorded_at.max(pos.recorded_at);
                    pairs.push((user.id.clone(), pos, false, when));
                }
            }
            for n in nearby.into_iter().filter(|n| n.user_id != user.id) {
                let when = me.recorded_at.max(n.recorded_at);
                pairs.push((user.id.clone(), n, true, when));
            }
        }
        plan_pairs(store, p, g, &pairs, &me, &mut out).await?;
    }
    Ok(out)
}

async fn plan_pairs(
    store: &dyn Store,
    p: &Project,
    g: &MovingGeofence,
    pairs: &[(String, Position, bool, Timestamp)],
    mover: &Position,
    out: &mut MovingPlan,
) -> Result<(), ApiError> {
    let pk = pair_pk(&p.project_id, &g.id);
    for (followed, other, inside, when) in pairs {
        let sk = format!("{followed}#{}", other.user_id);
        let state: Pair = store.get(Table::Main, &pk, &sk).await?.map(from_item).transpose()?.unwrap_or_default();
        if state.inside == *inside {
            continue;
        }
        // With only_once a pair's later visits report neither entry nor exit.
        let report_entry = *inside && !(g.only_once && state.entered);
        let kind = match *inside {
            true if report_entry => Some("motion:geofence:entry"),
            false if state.reported => Some("motion:geofence:exit"),
            _ => None,
        };
        let next = Pair { inside: *inside, entered: state.entered || *inside, reported: report_entry };
        out.states.push(WriteOp::Put { table: Table::Main, item: to_item(&pk, &sk, &next)?, cond: Cond::None });
        if let (Some(kind), true) = (kind, other.geofence_events) {
            let user_description = users::get(store, p, &other.user_id).await?.and_then(|u| u.description);
            // Keyed by the fix that moved the pair, so a re-evaluation yields the same id; in the
            // same order as static fences' events of that fix.
            let seq = super::events::fix_order(kind);
            let e = GeofenceEvent {
                id: super::events::event_id(*when, seq, &[&g.id, followed, &other.user_id, kind, &mover.location_id]),
                user_id: other.user_id.clone(),
                user_description,
                geofence_id: g.id.clone(),
                geofence_description: g.description.clone(),
                location_id: other.location_id.clone(),
                event_type: kind.to_owned(),
                recorded_at: *when,
                created_at: Timestamp::now(),
                is_deleted: false,
            };
            out.events.push((e, g.clone()));
        }
    }
    Ok(())
}
