//! Geofences (v1/v3): circles and polygons, optionally scoped to users or groups and to an
//! active window; the geohash index behind nearby search and event evaluation.
//!
//! Layout (main table):
//! - `<project>#F`, sort key fence id: the project's fences in creation order; a deleted fence
//!   moves to `<project>#FD` (kept, never listed);
//! - `<project>#C#<geohash>`, sort key the fence id behind a class prefix (see
//!   [`index::copy_sort_keys`]): a full copy of each fence in every cell of precision 6 its
//!   shape overlaps, so a search or an evaluation reads only index items. A fence and all its
//!   cell copies are written in one transaction, so the index never disagrees with the fence;
//!   hence a shape may cover at most [`MAX_CELLS`] cells (a circle of 1000 m covers 6 to 15);
//! - `<project>#CN#<geohash of precision 5>`, sort key a fine cell within it, attribute `n`: how
//!   many live fences are counted in that cell ([`index::count_cell`] of [`Geofence::anchor`]),
//!   kept by `ADD` in the same transaction as the fence's create, move or delete, so a search
//!   adds the fences of cells wholly inside its circle without reading them
//!   ([`index::SearchPlan`]).

pub mod events;
pub mod in_view;
pub mod index;
pub mod moving;
mod search;
mod shape;
pub mod view;
mod window;

use shape::parse_shape;
pub use shape::{infer_geometry, parse_radius, parse_ring};

pub use search::{FoundView, Hit, search_page, write_found};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::domain::{groups, list_pages, users};
use crate::error::ApiError;
use crate::geometry::{GeoPoint, GeoPolygon, LngLat};
use crate::ids::{id_range, is_id, new_id};
use crate::metadata::check_text;
use crate::metadata::{self, MetadataFilter};
use crate::paging::{Order, PageInfo, PageNumber};
use crate::project::Project;
use crate::store::{
    Cond, Doc, MAX_TRANSACT_OPS, Query, SkRange, Store, StoreError, Table, WriteOp, from_json, get_as, to_item,
};
use crate::time::{DateRange, Timestamp};

use index::Shape;

/// Circle radius bounds in meters (openapi.yaml, `CreateCircle.geometry_radius`).
pub const RADIUS_M: std::ops::RangeInclusive<i64> = 50..=1000;
/// Most index cells one fence may be indexed in (one transaction holds the fence,
/// its deleted copy, every cell copy, the list's 5 page counters (see `domain::list_pages`) and
/// its cell count).
pub const MAX_CELLS: usize = 92;
const _: () = assert!(3 + list_pages::LEVELS.len() + MAX_CELLS <= MAX_TRANSACT_OPS);
/// Most vertices of a polygon.
pub const MAX_VERTICES: usize = 500;
/// Most user ids, and most group ids, a fence may be scoped to.
pub const MAX_SCOPE_IDS: usize = 100;
/// Most ids in one bulk delete (openapi.yaml, `DeleteGeofences`).
pub const MAX_BULK_DELETE: usize = 200;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GeometryType {
    Circle,
    Polygon,
}

impl GeometryType {
    pub fn as_str(self) -> &'static str {
        match self {
            GeometryType::Circle => "circle",
            GeometryType::Polygon => "polygon",
        }
    }
    pub fn parse(field: &str, s: &str) -> Result<Self, ApiError> {
        match s.to_ascii_lowercase().as_str() {
            "circle" => Ok(Self::Circle),
            "polygon" => Ok(Self::Polygon),
            _ => Err(ApiError::field(field, format!("'{s}' is not circle or polygon"))),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Geofence {
    pub id: String,
    pub project_id: String,
    pub account_id: String,
    pub geometry_type: GeometryType,
    pub center: LngLat,
    pub radius_m: Option<u32>,
    pub ring: Option<Vec<LngLat>>,
    pub description: Option<String>,
    pub tag: Option<String>,
    pub color_code: Option<String>,
    pub metadata: Option<Map<String, Value>>,
    pub is_enabled: bool,
    pub active_from: Option<Timestamp>,
    pub active_until: Option<Timestamp>,
    /// Created with the user/group-scoped form (its `is_enabled` is shown as an array).
    pub scoped: bool,
    pub user_ids: Vec<String>,
    pub group_ids: Vec<String>,
    pub cells: Vec<String>,
    pub is_deleted: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub version: u64,
}

impl Geofence {
    pub fn shape(&self) -> Shape {
        match (&self.ring, self.radius_m) {
            (Some(ring), _) => Shape::Polygon(polygon(ring)),
            (None, r) => Shape::Circle { center: self.center, radius_m: f64::from(r.unwrap_or(0)) },
        }
    }

    /// The point of its shape it is counted at for search totals ([`index::count_cell`]): a
    /// circle's center, a polygon's first vertex (its boundary counts as inside; its centroid may
    /// lie outside).
    pub fn anchor(&self) -> LngLat {
        self.ring.as_ref().and_then(|r| r.first().copied()).unwrap_or(self.center)
    }

    /// Whether it triggers events at `t`: enabled and inside its window.
    pub fn active_at(&self, t: Timestamp) -> bool {
        self.is_enabled && self.active_from.is_none_or(|a| a <= t) && self.active_until.is_none_or(|b| t <= b)
    }

    /// Whether it applies to a user in these groups: no users and no groups means everyone.
    pub fn applies_to(&self, user_id: &str, groups: &[String]) -> bool {
        (self.user_ids.is_empty() && self.group_ids.is_empty())
            || self.user_ids.iter().any(|u| u == user_id)
            || self.group_ids.iter().any(|g| groups.contains(g))
    }
}

fn polygon(ring: &[LngLat]) -> geo::Polygon<f64> {
    geo::Polygon::new(ring.iter().map(|p| geo::Coord { x: p.lng, y: p.lat }).collect(), vec![])
}

pub(crate) fn fences_pk(project_id: &str) -> String {
    [project_id, "#F"].concat()
}
pub(crate) fn deleted_pk(project_id: &str) -> String {
    [project_id, "#FD"].concat()
}
pub fn cell_pk(project_id: &str, cell: &str) -> String {
    [project_id, "#C#", cell].concat()
}
/// The partition of the fence counts of the fine cells within a coarse cell.
pub fn counts_pk(project_id: &str, coarse_cell: &str) -> String {
    [project_id, "#CN#", coarse_cell].concat()
}

/// The operation that counts a fence in (`delta` 1) or out (-1) of its count cell `cell`
/// ([`index::count_cell`]): part of the transaction that writes or removes the fence, whose
/// condition decides whether it happens.
fn count_op(project_id: &str, cell: String, delta: i64) -> WriteOp {
    let pk = counts_pk(project_id, &cell[..index::COARSE_PRECISION]);
    WriteOp::Add { table: Table::Main, pk, sk: cell, attr: "n", delta }
}

/// `is_enabled` as given: a boolean, or `[boolean, start_time, end_time]` (the scoped form).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Enabled {
    Flag(bool),
    Window(Vec<Value>),
}

/// The create body, both forms. `geometry_type` may be left out, as Roam's own examples do: a
/// `[lng, lat]` position is a circle, an array of positions (or of rings) a polygon.
#[derive(Debug, Deserialize)]
pub struct CreateGeofence {
    pub coordinates: Value,
    #[serde(default)]
    pub geometry_type: Option<String>,
    #[serde(default)]
    pub geometry_radius: Option<Value>,
    #[serde(default)]
    pub color_code: Option<String>,
    #[serde(default)]
    pub tag: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub metadata: Option<Map<String, Value>>,
    #[serde(default)]
    pub is_enabled: Option<Enabled>,
    #[serde(default)]
    pub user_ids: Option<Vec<String>>,
    #[serde(default)]
    pub group_ids: Option<Vec<String>>,
    /// The active window, as on update (each a timestamp or null; one needs the other).
    #[serde(default, deserialize_with = "window::some_value")]
    pub enable_at: Option<Value>,
    #[serde(default, deserialize_with = "window::some_value")]
    pub disable_at: Option<Value>,
}

/// 3 or 6 hex digits, no `#`.
pub fn check_color(c: &Option<String>) -> Result<(), ApiError> {
    match c {
        Some(c) if !matches!(c.len(), 3 | 6) || !c.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Err(ApiError::field("color_code", format!("'{c}' is not 3 or 6 hex digits (CSS color without #)")))
        }
        _ => Ok(()),
    }
}

/// Ids of users of this project (all must exist) and group ids (must be well-formed and have
/// members in this project).
async fn check_scope(
    store: &dyn Store,
    p: &Project,
    user_ids: &[String],
    group_ids: &[String],
) -> Result<(), ApiError> {
    let mut unknown = Vec::new();
    for u in user_ids {
        if users::record(store, p, u).await?.is_none() {
            unknown.push(u.as_str());
        }
    }
    if !unknown.is_empty() {
        return Err(ApiError::field("user_ids", format!("no such user in this project: {}", unknown.join(", "))));
    }
    let mut unknown = Vec::new();
    for g in group_ids {
        if groups::check_group_id(g).is_err() || !groups::exists(store, p, g).await? {
            unknown.push(g.as_str());
        }
    }
    if !unknown.is_empty() {
        return Err(ApiError::field("group_ids", format!("no such group in this project: {}", unknown.join(", "))));
    }
    Ok(())
}

/// The key (partition, sort) of each of the fence's cell copies, in the order of `g.cells`.
pub fn copy_keys(g: &Geofence) -> Vec<(String, String)> {
    g.cells.iter().zip(index::copy_sort_keys(&g.cells, &g.id)).map(|(c, sk)| (cell_pk(&g.project_id, c), sk)).collect()
}

/// The writes of `g` and its cell copies.
pub(crate) fn write_ops(g: &Geofence, cond: Cond) -> Result<Vec<WriteOp>, ApiError> {
    let mut ops = vec![WriteOp::Put { table: Table::Main, item: to_item(&fences_pk(&g.project_id), &g.id, g)?, cond }];
    for (pk, sk) in copy_keys(g) {
        ops.push(WriteOp::Put { table: Table::Main, item: to_item(&pk, &sk, g)?, cond: Cond::None });
    }
    Ok(ops)
}

/// [`write_ops`], and the deletes of the copies at `before` (keys of the fence as it was) that
/// the new ones do not overwrite.
fn rewrite_ops(g: &Geofence, before: &[(String, String)], cond: Cond) -> Result<Vec<WriteOp>, ApiError> {
    let mut ops = write_ops(g, cond)?;
    let now = copy_keys(g);
    for (pk, sk) in before.iter().filter(|k| !now.contains(k)) {
        ops.push(WriteOp::Delete { table: Table::Main, pk: pk.clone(), sk: sk.clone(), cond: Cond::None });
    }
    Ok(ops)
}

pub async fn create(store: &dyn Store, p: &Project, input: CreateGeofence) -> Result<Geofence, ApiError> {
    let kind = infer_geometry(input.geometry_type.as_deref(), &input.coordinates)?;
    check_color(&input.color_code)?;
    check_text("tag", &input.tag)?;
    check_text("description", &input.description)?;
    if let Some(m) = &input.metadata {
        metadata::validate("metadata", m)?;
    }
    let (center, radius_m, ring) = parse_shape(kind, &input.coordinates, input.geometry_radius.as_ref())?;
    let (is_enabled, active_from, active_until, window_form) = match &input.is_enabled {
        None => (false, None, None, false),
        Some(Enabled::Flag(b)) => (*b, None, None, false),
        Some(Enabled::Window(v)) => {
            let (f, a, b) = window::parse_window(v)?;
            (f, a, b, true)
        }
    };
    // `enable_at` / `disable_at` as the update takes them (over the array's times, as there).
    let (active_from, active_until, window_form) = match window::pair(&input.enable_at, &input.disable_at)? {
        Some((a, b)) => (a, b, true),
        None => (active_from, active_until, window_form),
    };
    window::check_order(active_from, active_until)?;
    let user_ids = dedup(input.user_ids.clone().unwrap_or_default());
    let group_ids = dedup(input.group_ids.clone().unwrap_or_default());
    for (field, ids) in [("user_ids", &user_ids), ("group_ids", &group_ids)] {
        if ids.len() > MAX_SCOPE_IDS {
            return Err(ApiError::field(field, format!("at most {MAX_SCOPE_IDS} ids")));
        }
    }
    check_scope(store, p, &user_ids, &group_ids).await?;
    let now = Timestamp::now();
    let mut g = Geofence {
        id: new_id(),
        project_id: p.project_id.clone(),
        account_id: p.account_id.clone(),
        geometry_type: kind,
        center,
        radius_m,
        ring,
        description: input.description,
        tag: input.tag,
        color_code: input.color_code,
        metadata: input.metadata,
        is_enabled,
        active_from,
        active_until,
        scoped: window_form || input.user_ids.is_some() || input.group_ids.is_some(),
        user_ids,
        group_ids,
        cells: Vec::new(),
        is_deleted: false,
        created_at: now,
        updated_at: now,
        version: 1,
    };
    g.cells = index_cells(&g)?;
    let mut ops = write_ops(&g, Cond::NotExists)?;
    ops.extend(list_pages::count_ops(Table::Main, &fences_pk(&g.project_id), &g.id, 1));
    ops.push(count_op(&g.project_id, index::count_cell(g.anchor())?, 1));
    store.transact(ops).await?;
    Ok(g)
}

/// The index cells of a fence's shape, at most [`MAX_CELLS`].
fn index_cells(g: &Geofence) -> Result<Vec<String>, ApiError> {
    let cells = g.shape().cells("coordinates")?;
    if cells.len() > MAX_CELLS {
        return Err(ApiError::field(
            "coordinates",
            format!(
                "the shape covers {} index cells; at most {MAX_CELLS} (a polygon up to about 5 km across)",
                cells.len()
            ),
        ));
    }
    Ok(cells)
}

fn dedup(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v.dedup();
    v
}

pub async fn get(store: &dyn Store, p: &Project, id: &str) -> Result<Geofence, ApiError> {
    let missing = || ApiError::not_found(format!("geofence_id: no geofence '{id}' in this project"));
    if !is_id(id) {
        return Err(missing());
    }
    get_as(store, Table::Main, &fences_pk(&p.project_id), id).await?.ok_or_else(missing)
}

/// An update: which fence (`geofence_id`: a string; v3 documents it as an integer, so a number
/// is taken too) and what may change. Every field Roam documents is honoured; any other is a 400.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateGeofence {
    pub geofence_id: Value,
    #[serde(default)]
    pub metadata: Option<Map<String, Value>>,
    #[serde(default)]
    pub color_code: Option<String>,
    #[serde(default)]
    pub tag: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    /// A boolean, or (static fences) `[enabled, start_time, end_time]`.
    #[serde(default)]
    pub is_enabled: Option<Enabled>,
    /// A new shape (static fences; a moving fence takes only `geometry_radius`).
    #[serde(default)]
    pub coordinates: Option<Value>,
    #[serde(default)]
    pub geometry_type: Option<String>,
    #[serde(default)]
    pub geometry_radius: Option<Value>,
    /// A new scope (static fences): replaces the users / groups it applies to.
    #[serde(default)]
    pub user_ids: Option<Vec<String>>,
    #[serde(default)]
    pub group_ids: Option<Vec<String>>,
    /// The active window (static fences): a timestamp, or null to open that end.
    #[serde(default, deserialize_with = "window::some_value")]
    pub enable_at: Option<Value>,
    #[serde(default, deserialize_with = "window::some_value")]
    pub disable_at: Option<Value>,
}

impl UpdateGeofence {
    /// The fields only a static fence has, by name, when given (a moving fence refuses them).
    pub fn static_only_fields(&self) -> Vec<&'static str> {
        let window = matches!(self.is_enabled, Some(Enabled::Window(_)));
        [
            ("coordinates", self.coordinates.is_some()),
            ("geometry_type", self.geometry_type.is_some()),
            ("user_ids", self.user_ids.is_some()),
            ("group_ids", self.group_ids.is_some()),
            ("enable_at", self.enable_at.is_some()),
            ("disable_at", self.disable_at.is_some()),
            ("is_enabled", window),
        ]
        .into_iter()
        .filter_map(|(f, given)| given.then_some(f))
        .collect()
    }

    pub fn validate(&self) -> Result<(), ApiError> {
        check_color(&self.color_code)?;
        check_text("tag", &self.tag)?;
        check_text("description", &self.description)?;
        self.metadata.as_ref().map(|m| metadata::validate("metadata", m)).transpose()?;
        Ok(())
    }

    /// Apply to a fence's fields (static and moving fences share them); absent fields stay.
    pub fn apply(&self, f: FenceFields<'_>) {
        if let Some(m) = &self.metadata {
            *f.metadata = Some(m.clone());
        }
        for (slot, v) in [(f.color_code, &self.color_code), (f.tag, &self.tag), (f.description, &self.description)] {
            if let Some(v) = v {
                *slot = Some(v.clone());
            }
        }
        match &self.is_enabled {
            Some(Enabled::Flag(e)) => *f.is_enabled = *e,
            Some(Enabled::Window(w)) => {
                if let Some(e) = w.first().and_then(Value::as_bool) {
                    *f.is_enabled = e;
                }
            }
            None => {}
        }
    }

    /// Apply the shape, scope and window changes to a static fence (validated, the scope's ids
    /// checked beforehand by [`update`]; cells recomputed).
    fn apply_static(&self, g: &mut Geofence) -> Result<(), ApiError> {
        if self.coordinates.is_some() || self.geometry_type.is_some() || self.geometry_radius.is_some() {
            let kind = match (&self.geometry_type, &self.coordinates) {
                (None, None) => g.geometry_type,
                (t, Some(c)) => infer_geometry(t.as_deref(), c)?,
                (Some(t), None) => GeometryType::parse("geometry_type", t)?,
            };
            let coordinates = match (&self.coordinates, kind == g.geometry_type) {
                (Some(c), _) => c.clone(),
                (None, true) => match &g.ring {
                    Some(ring) => json!(ring.iter().map(|p| [p.lng, p.lat]).collect::<Vec<_>>()),
                    None => json!([g.center.lng, g.center.lat]),
                },
                (None, false) => return Err(ApiError::field("coordinates", "are required to change geometry_type")),
            };
            let radius = self.geometry_radius.clone().or_else(|| g.radius_m.map(Value::from));
            let (center, radius_m, ring) = parse_shape(kind, &coordinates, radius.as_ref())?;
            (g.geometry_type, g.center, g.radius_m, g.ring) = (kind, center, radius_m, ring);
            g.cells = index_cells(g)?;
        }
        if self.user_ids.is_some() || self.group_ids.is_some() {
            let users = dedup(self.user_ids.clone().unwrap_or_else(|| g.user_ids.clone()));
            let groups = dedup(self.group_ids.clone().unwrap_or_else(|| g.group_ids.clone()));
            (g.user_ids, g.group_ids, g.scoped) = (users, groups, true);
        }
        if let Some(Enabled::Window(w)) = &self.is_enabled {
            let (flag, a, b) = window::parse_window(w)?;
            (g.is_enabled, g.active_from, g.active_until, g.scoped) = (flag, a, b, true);
        }
        // Roam takes the window as a pair and answers the fence in its scoped shape, window
        // shown: so does Waymark, never a window hidden behind a project-wide fence's boolean.
        if let Some((a, b)) = window::pair(&self.enable_at, &self.disable_at)? {
            (g.active_from, g.active_until, g.scoped) = (a, b, true);
        }
        window::check_order(g.active_from, g.active_until)
    }
}

/// The fields an update may change, borrowed from a static or a moving fence.
pub struct FenceFields<'a> {
    pub metadata: &'a mut Option<Map<String, Value>>,
    pub color_code: &'a mut Option<String>,
    pub tag: &'a mut Option<String>,
    pub description: &'a mut Option<String>,
    pub is_enabled: &'a mut bool,
}

pub async fn update(store: &dyn Store, p: &Project, id: &str, up: UpdateGeofence) -> Result<Geofence, ApiError> {
    up.validate()?;
    // The new scope is checked once, not on every retry (its users and groups do not change
    // between attempts; only the fence record races).
    let (users, groups) =
        (dedup(up.user_ids.clone().unwrap_or_default()), dedup(up.group_ids.clone().unwrap_or_default()));
    for (field, ids) in [("user_ids", &users), ("group_ids", &groups)] {
        if ids.len() > MAX_SCOPE_IDS {
            return Err(ApiError::field(field, format!("at most {MAX_SCOPE_IDS} ids")));
        }
    }
    check_scope(store, p, &users, &groups).await?;
    for _ in 0..20 {
        let mut g = get(store, p, id).await?;
        let expected = g.version;
        let before = copy_keys(&g);
        let counted_before = index::count_cell(g.anchor())?;
        up.apply(FenceFields {
            metadata: &mut g.metadata,
            color_code: &mut g.color_code,
            tag: &mut g.tag,
            description: &mut g.description,
            is_enabled: &mut g.is_enabled,
        });
        up.apply_static(&mut g)?;
        g.version += 1;
        g.updated_at = Timestamp::now();
        let mut ops = rewrite_ops(&g, &before, Cond::Equals("version", expected.into()))?;
        let counted = index::count_cell(g.anchor())?;
        if counted != counted_before {
            ops.extend([count_op(&p.project_id, counted_before, -1), count_op(&p.project_id, counted, 1)]);
        }
        if ops.len() > MAX_TRANSACT_OPS {
            return Err(ApiError::field(
                "coordinates",
                "the old and new shapes together cover too many index cells; delete and create instead",
            ));
        }
        match store.transact(ops).await {
            Ok(()) => return Ok(g),
            Err(StoreError::ConditionFailed) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::conflict("geofence_id: the geofence is being changed by other requests; retry"))
}

/// Delete one fence: it leaves lists, search and evaluation at once (same transaction).
pub async fn delete(store: &dyn Store, p: &Project, id: &str) -> Result<(), ApiError> {
    for _ in 0..20 {
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
            WriteOp::Put {
                table: Table::Main,
                item: to_item(&deleted_pk(&p.project_id), &g.id, &g)?,
                cond: Cond::None,
            },
        ];
        ops.extend(list_pages::count_ops(Table::Main, &fences_pk(&p.project_id), &g.id, -1));
        ops.push(count_op(&p.project_id, index::count_cell(g.anchor())?, -1));
        // At most MAX_CELLS copies: with the rows above, one transaction.
        for (pk, sk) in copy_keys(&g) {
            ops.push(WriteOp::Delete { table: Table::Main, pk, sk, cond: Cond::None });
        }
        match store.transact(ops).await {
            Ok(()) => return Ok(()),
            Err(StoreError::ConditionFailed) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::conflict("geofence_id: the geofence is being changed by other requests; retry"))
}

/// Delete up to 200 fences; every id must exist (checked first, so an unknown id deletes none).
pub async fn delete_many(store: &dyn Store, p: &Project, ids: &[String]) -> Result<usize, ApiError> {
    if ids.is_empty() || ids.len() > MAX_BULK_DELETE {
        return Err(ApiError::field("geofence_id", format!("give 1 to {MAX_BULK_DELETE} ids, got {}", ids.len())));
    }
    let ids = dedup(ids.to_vec());
    let mut unknown = Vec::new();
    for id in &ids {
        if !is_id(id) || store.get(Table::Main, &fences_pk(&p.project_id), id).await?.is_none() {
            unknown.push(id.as_str());
        }
    }
    if !unknown.is_empty() {
        return Err(ApiError::not_found(format!(
            "geofence_id: no such geofence in this project: {}",
            unknown.join(", ")
        )));
    }
    for id in &ids {
        delete(store, p, id).await?;
    }
    Ok(ids.len())
}

/// Filters of the lists.
#[derive(Debug, Default)]
pub struct ListFilter {
    pub range: Option<DateRange>,
    pub color_code: Option<String>,
    pub tag: Option<String>,
    pub geometry_type: Option<GeometryType>,
    pub metadata: Option<MetadataFilter>,
    /// Fences scoped to this user (named in `user_ids`).
    pub user_id: Option<String>,
    /// Fences scoped to this group (named in `group_ids`).
    pub group_id: Option<String>,
}

/// The fences that pass `f`, newest first, one page, as stored JSON documents (shown through
/// [`view::view_json`], or decoded).
pub async fn list(
    store: &dyn Store,
    p: &Project,
    f: &ListFilter,
    page: PageNumber,
) -> Result<(Vec<Doc>, PageInfo), ApiError> {
    let keep = |g: &Geofence| {
        f.color_code.as_ref().is_none_or(|c| g.color_code.as_ref().is_some_and(|gc| gc.eq_ignore_ascii_case(c)))
            && f.tag.as_ref().is_none_or(|t| g.tag.as_ref() == Some(t))
            && f.geometry_type.is_none_or(|k| g.geometry_type == k)
            && f.metadata.as_ref().is_none_or(|m| m.matches(g.metadata.as_ref()))
            && f.user_id.as_ref().is_none_or(|u| g.user_ids.contains(u))
            && f.group_id.as_ref().is_none_or(|u| g.group_ids.contains(u))
    };
    let filtered = f.color_code.is_some()
        || f.tag.is_some()
        || f.geometry_type.is_some()
        || f.metadata.is_some()
        || f.user_id.is_some()
        || f.group_id.is_some();
    let keep = filtered.then_some(&keep as &(dyn Fn(&Geofence) -> bool + Sync));
    // Newest first, as Roam lists them.
    let ids = f.range.map(|r| id_range(&r));
    let pk = fences_pk(&p.project_id);
    Ok(list_pages::page_where(store, Table::Main, &pk, ids, page, keep, Order::NewestFirst).await?)
}

/// Fences indexed in one cell (copies from the index).
pub async fn in_cell(store: &dyn Store, p: &Project, cell: &str) -> Result<Vec<Geofence>, ApiError> {
    // Through `query_docs_many`: one small read on the calling task (embedded store), decoded
    // straight into fences. Eventually consistent: every batch of every user in the cell reads
    // it, and a fence written in the last second or so is found by the next batch instead.
    let q = [Query::new(cell_pk(&p.project_id, cell), SkRange::All).eventual()];
    let docs = store.query_docs_many(Table::Main, &q).await?.into_iter().flatten();
    Ok(docs.map(|d| from_json(&d)).collect::<Result<_, _>>()?)
}

/// The Geofence shape of v1/v3 responses (`id_key` is `id` or, in the metadata list, `geofence_id`).
pub fn geofence_json(g: &Geofence, id_key: &str) -> Value {
    // Only string keys: the conversion cannot fail.
    serde_json::to_value(view::GeofenceView::new(g, id_key)).unwrap_or(Value::Null)
}

/// The response of the user/group-scoped create (openapi.yaml, `ScopedGeofenceCreated`).
pub fn scoped_created_json(g: &Geofence) -> Value {
    let mut v = json!({
        "geofence_id": g.id,
        "geometry_type": g.geometry_type.as_str(),
        "geometry_radius": g.radius_m,
        "geometry_center": GeoPoint::from(g.center),
        "is_enabled": view::Enabled::of(g),
        "user_ids": g.user_ids,
        "group_ids": g.group_ids,
        "is_deleted": g.is_deleted,
        "created_at": g.created_at.format(None),
        "updated_at": g.updated_at.format(None),
    });
    // Echoed when given, as Roam's worked examples show them (a client stores them from here).
    for (k, given) in [("description", &g.description), ("tag", &g.tag), ("color_code", &g.color_code)] {
        if let Some(text) = given {
            v[k] = json!(text);
        }
    }
    if let Some(m) = &g.metadata {
        v["metadata"] = json!(m);
    }
    if let Some(ring) = &g.ring {
        v["geometry"] = json!({"type": "Polygon", "coordinates": [ring]});
    }
    v
}
