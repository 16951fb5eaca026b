//! Users: the devices that run the tracking SDK inside a customer's app.
//!
//! Layout (main table): live users at `pk = <project>#U`, `sk = <user id>`, so listing in creation
//! order, and by creation date, is one Query. Deleting a user erases them and everything derived
//! from them (see `pipeline::erasure`).
//!
//! The record is written only by the user's own requests (create, update, erase). Their latest
//! location lives in their watermark (`domain::sequence`, in the user's own partition), which
//! every processing pass writes anyway; reads that show it ([`get`], [`require`], [`list`]) read
//! it beside the record. `last_location_update` on a record is what a pass wrote there before
//! (shown until a pass moves the watermark's).

use chrono_tz::Tz;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::ids::{id_range, is_id, new_id};
use crate::metadata::{self, MetadataFilter};
use crate::paging::{Order, PageInfo, PageNumber};
use crate::project::Project;
use crate::store::{Cond, Doc, Query, SkRange, Store, StoreError, Table, from_json, to_item};
use crate::time::{DateRange, Timestamp};

use super::locations::view::LastLocation;
use super::locations::{Location, LocationView};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct User {
    pub id: String,
    pub project_id: String,
    pub account_id: String,
    pub app_type: u8,
    pub device_token: String,
    pub device_uuid: String,
    pub description: Option<String>,
    pub brand: String,
    pub model: String,
    pub os_version: String,
    pub sdk_version: String,
    pub device_arn: String,
    // Which kinds of events are enabled for the user; all false at creation. Fields of their own
    // rather than a flattened struct: serde buffers a whole record to fill a flattened field,
    // which doubled the cost of decoding a user (a list page decodes ten).
    pub geofence_events: bool,
    pub motion_events: bool,
    pub location_events: bool,
    pub trips_events: bool,
    pub nearby_events: bool,
    pub location_listener: bool,
    pub event_listener: bool,
    pub metadata: Option<Map<String, Value>>,
    pub is_deleted: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub last_location_update: Option<Location>,
    /// Optimistic-concurrency version: every write checks and bumps it.
    pub version: u64,
}

/// `POST /v1/api/user/` body.
#[derive(Debug, Deserialize)]
pub struct CreateUser {
    pub app_type: u8,
    pub device_token: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub metadata: Option<Map<String, Value>>,
    #[serde(default)]
    pub device_uuid: Option<String>,
    #[serde(default)]
    pub brand: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub os_version: Option<String>,
    #[serde(default)]
    pub sdk_version: Option<String>,
}

/// `PUT /v1/api/user/` body: every field but `user_id` optional; absent fields are unchanged.
#[derive(Debug, Deserialize)]
pub struct UpdateUser {
    pub user_id: String,
    pub description: Option<String>,
    pub metadata: Option<Map<String, Value>>,
    pub device_token: Option<String>,
    pub device_uuid: Option<String>,
    pub brand: Option<String>,
    pub model: Option<String>,
    pub os_version: Option<String>,
    pub sdk_version: Option<String>,
    pub geofence_events: Option<bool>,
    pub motion_events: Option<bool>,
    pub location_events: Option<bool>,
    pub trips_events: Option<bool>,
    pub nearby_events: Option<bool>,
    pub location_listener: Option<bool>,
    pub event_listener: Option<bool>,
}

pub fn users_pk(project_id: &str) -> String {
    [project_id, "#U"].concat()
}

fn text(field: &str, v: Option<String>) -> Result<Option<String>, ApiError> {
    crate::metadata::check_text(field, &v)?;
    Ok(v)
}

fn device_token(v: String) -> Result<String, ApiError> {
    if v.trim().is_empty() {
        return Err(ApiError::field(
            "device_token",
            "must not be empty (a placeholder is fine until the device has one)",
        ));
    }
    Ok(text("device_token", Some(v))?.unwrap_or_default())
}

pub fn check_user_id(field: &str, id: &str) -> Result<(), ApiError> {
    if is_id(id) { Ok(()) } else { Err(ApiError::field(field, format!("'{id}' is not a user id"))) }
}

pub async fn create(store: &dyn Store, p: &Project, input: CreateUser) -> Result<User, ApiError> {
    if !matches!(input.app_type, 1 | 2) {
        return Err(ApiError::field("app_type", format!("{} is not 1 (Android) or 2 (iOS)", input.app_type)));
    }
    if let Some(m) = &input.metadata {
        metadata::validate("metadata", m)?;
    }
    let now = Timestamp::now();
    let user = User {
        id: new_id(),
        project_id: p.project_id.clone(),
        account_id: p.account_id.clone(),
        app_type: input.app_type,
        device_token: device_token(input.device_token)?,
        device_uuid: text("device_uuid", input.device_uuid)?.unwrap_or_default(),
        description: text("description", input.description)?,
        brand: text("brand", input.brand)?.unwrap_or_default(),
        model: text("model", input.model)?.unwrap_or_default(),
        os_version: text("os_version", input.os_version)?.unwrap_or_default(),
        sdk_version: text("sdk_version", input.sdk_version)?.unwrap_or_default(),
        device_arn: String::new(),
        geofence_events: false,
        motion_events: false,
        location_events: false,
        trips_events: false,
        nearby_events: false,
        location_listener: false,
        event_listener: false,
        metadata: input.metadata,
        is_deleted: false,
        created_at: now,
        updated_at: now,
        last_location_update: None,
        version: 1,
    };
    // Counted for the list's pages in the same transaction.
    super::list_pages::insert(store, Table::Main, to_item(&users_pk(&p.project_id), &user.id, &user)?).await?;
    Ok(user)
}

/// A live (not deleted) user of this project, with their latest location.
pub async fn get(store: &dyn Store, p: &Project, user_id: &str) -> Result<Option<User>, ApiError> {
    if !is_id(user_id) {
        return Ok(None);
    }
    let (user, latest) = futures::try_join!(record(store, p, user_id), latest(store, p, user_id))?;
    Ok(user.map(|u| with_latest(u, latest)))
}

/// The user record alone, as stored: its `last_location_update` is not the latest. For the events
/// processor, which keeps the latest location, and for checks that a user exists (one read).
pub async fn record(store: &dyn Store, p: &Project, user_id: &str) -> Result<Option<User>, ApiError> {
    read(store, p, user_id).await
}

pub async fn require(store: &dyn Store, p: &Project, field: &str, user_id: &str) -> Result<User, ApiError> {
    check_user_id(field, user_id)?;
    let (user, latest) = futures::try_join!(require_as(store, p, field, user_id), latest(store, p, user_id))?;
    Ok(with_latest(user, latest))
}

async fn latest(store: &dyn Store, p: &Project, user_id: &str) -> Result<Option<Location>, ApiError> {
    Ok(super::sequence::read(store, p, user_id).await?.latest)
}

/// The record's location replaced by the watermark's, when a pass has written one there.
fn with_latest(mut u: User, latest: Option<Location>) -> User {
    if latest.is_some() {
        u.last_location_update = latest;
    }
    u
}

/// What most requests need of the user they name: that it exists, its id and its app.
#[derive(Debug, Clone, Deserialize)]
pub struct UserRef {
    pub id: String,
    pub project_id: String,
    pub app_type: u8,
}

impl UserRef {
    pub fn app_id(&self) -> String {
        app_id_of(&self.project_id, self.app_type)
    }
}

/// [`require`] decoding only the [`UserRef`]: the record's other fields (metadata, the last
/// location) are skipped, not built (a fifth of the read of an insights answer was decoding the
/// whole user).
pub async fn require_ref(store: &dyn Store, p: &Project, field: &str, user_id: &str) -> Result<UserRef, ApiError> {
    require_as(store, p, field, user_id).await
}

/// The user's record for ingest's check of a batch's user, read eventually consistent first
/// (half a read unit: every batch of every user of a project reads this one partition), and
/// strongly only when that read finds nothing, since it may miss a user created a moment ago.
/// The batch's own pass starts from this record instead of reading it again
/// (`pipeline::processor`): a record a second stale there is harmless (a concurrent update's
/// fields reach the next batch's messages; an erasure marks the watermark `erasing`, and a user
/// with no watermark is read strongly, so the pass drops what such a batch stored).
pub async fn require_for_ingest(store: &dyn Store, p: &Project, field: &str, user_id: &str) -> Result<User, ApiError> {
    check_user_id(field, user_id)?;
    let q = Query::new(users_pk(&p.project_id), SkRange::Between(user_id.into(), user_id.into())).limit(1).eventual();
    match store.query_docs(Table::Main, &q).await?.first() {
        Some(doc) => Ok(from_json(doc)?),
        None => require_as(store, p, field, user_id).await,
    }
}

/// The user's stored JSON document; None when there is none (or `user_id` is not an id).
async fn read_doc(store: &dyn Store, p: &Project, user_id: &str) -> Result<Option<Doc>, StoreError> {
    if !is_id(user_id) {
        return Ok(None);
    }
    store.get_doc(Table::Main, &users_pk(&p.project_id), user_id).await
}

/// The user's record decoded as `T` (the whole [`User`] or a [`UserRef`]).
async fn read<T: DeserializeOwned>(store: &dyn Store, p: &Project, user_id: &str) -> Result<Option<T>, ApiError> {
    Ok(read_doc(store, p, user_id).await?.map(|d| from_json(&d)).transpose()?)
}

/// [`require`] as the stored JSON document (shown through [`view_json`]).
pub async fn require_doc(store: &dyn Store, p: &Project, field: &str, user_id: &str) -> Result<Doc, ApiError> {
    check_user_id(field, user_id)?;
    read_doc(store, p, user_id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("{field}: no user '{user_id}' in this project")))
}

/// A stored user as [`view_json`] shows them: the record's document and the latest location.
pub struct Listed {
    pub doc: Doc,
    pub latest: Option<Location>,
}

/// [`require_doc`] with the user's latest location.
pub async fn require_listed(store: &dyn Store, p: &Project, field: &str, user_id: &str) -> Result<Listed, ApiError> {
    let (doc, latest) = futures::try_join!(require_doc(store, p, field, user_id), latest(store, p, user_id))?;
    Ok(Listed { doc, latest })
}

async fn require_as<T: DeserializeOwned>(
    store: &dyn Store,
    p: &Project,
    field: &str,
    user_id: &str,
) -> Result<T, ApiError> {
    Ok(from_json(&require_doc(store, p, field, user_id).await?)?)
}

/// Write `user` if nobody changed it since it was read (version check), bumping its version.
pub async fn save(store: &dyn Store, mut user: User) -> Result<User, StoreError> {
    let expected = user.version;
    user.version += 1;
    let item = to_item(&users_pk(&user.project_id), &user.id, &user)?;
    store.put(Table::Main, item, Cond::Equals("version", expected.into())).await?;
    Ok(user)
}

/// Read-modify-write of one user, retried when a concurrent write got in first.
pub async fn modify(
    store: &dyn Store,
    p: &Project,
    field: &str,
    user_id: &str,
    change: impl Fn(&mut User) -> Result<bool, ApiError>,
) -> Result<User, ApiError> {
    for _ in 0..20 {
        let mut user = require(store, p, field, user_id).await?;
        if !change(&mut user)? {
            return Ok(user);
        }
        match save(store, user).await {
            Ok(u) => return Ok(u),
            Err(StoreError::ConditionFailed) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::conflict(format!("{field}: user '{user_id}' is being changed by other requests; retry")))
}

pub async fn update(store: &dyn Store, p: &Project, input: UpdateUser) -> Result<User, ApiError> {
    if let Some(m) = &input.metadata {
        metadata::validate("metadata", m)?;
    }
    let description = text("description", input.description.clone())?;
    let token = input.device_token.clone().map(device_token).transpose()?;
    let strings = [
        ("device_uuid", &input.device_uuid),
        ("brand", &input.brand),
        ("model", &input.model),
        ("os_version", &input.os_version),
        ("sdk_version", &input.sdk_version),
    ];
    for (f, v) in strings {
        text(f, v.clone())?;
    }
    modify(store, p, "user_id", &input.user_id, |u| {
        if let Some(d) = &description {
            u.description = Some(d.clone());
        }
        if let Some(m) = &input.metadata {
            u.metadata = Some(m.clone());
        }
        if let Some(t) = &token {
            u.device_token = t.clone();
        }
        for (slot, v) in [
            (&mut u.device_uuid, &input.device_uuid),
            (&mut u.brand, &input.brand),
            (&mut u.model, &input.model),
            (&mut u.os_version, &input.os_version),
            (&mut u.sdk_version, &input.sdk_version),
        ] {
            if let Some(v) = v {
                *slot = v.clone();
            }
        }
        let f = &mut *u;
        for (slot, v) in [
            (&mut f.geofence_events, input.geofence_events),
            (&mut f.motion_events, input.motion_events),
            (&mut f.location_events, input.location_events),
            (&mut f.trips_events, input.trips_events),
            (&mut f.nearby_events, input.nearby_events),
            (&mut f.location_listener, input.location_listener),
            (&mut f.event_listener, input.event_listener),
        ] {
            if let Some(v) = v {
                *slot = v;
            }
        }
        u.updated_at = Timestamp::now();
        Ok(true)
    })
    .await
}

/// Users created inside `range` (all when None), in creation order, one page, as stored JSON
/// documents with their latest locations (shown through [`view_json`]).
pub async fn list(
    store: &dyn Store,
    p: &Project,
    range: Option<DateRange>,
    filter: Option<&MetadataFilter>,
    page: PageNumber,
) -> Result<(Vec<Listed>, PageInfo), ApiError> {
    let pk = users_pk(&p.project_id);
    let ids = range.map(|r| id_range(&r));
    let keep = filter.map(|f| move |u: &User| f.matches(u.metadata.as_ref()));
    let keep = keep.as_ref().map(|k| k as &(dyn Fn(&User) -> bool + Sync));
    let (docs, info) =
        super::list_pages::page_where(store, Table::Main, &pk, ids, page, keep, Order::OldestFirst).await?;
    #[derive(Deserialize)]
    struct Id {
        id: String,
    }
    let ids: Vec<Id> = docs.iter().map(|d| from_json(d)).collect::<Result<_, _>>()?;
    let ids: Vec<&str> = ids.iter().map(|i| i.id.as_str()).collect();
    let latest = super::sequence::latest_of(store, p, &ids).await?;
    Ok((docs.into_iter().zip(latest).map(|(doc, latest)| Listed { doc, latest }).collect(), info))
}

/// A stored user as lists show it ([`UserView`]).
pub fn view_json(user: &Listed, tz: Option<Tz>) -> Result<Box<RawValue>, StoreError> {
    let u = with_latest(from_json(&user.doc)?, user.latest.clone());
    crate::store::rendered("user", &UserView::new(&u, tz))
}

/// `<project_id>_<1 or 2>`.
pub fn app_id(u: &User) -> String {
    app_id_of(&u.project_id, u.app_type)
}

fn app_id_of(project_id: &str, app_type: u8) -> String {
    format!("{project_id}_{app_type}")
}

/// A user as lists return it: every field of openapi.yaml's `User` schema. Serialised straight into
/// the response (a `json!` tree per user was an eighth of a warm list request's time); fields in
/// sorted order, as the tree wrote them.
#[derive(Debug, Serialize)]
pub struct UserView<'a> {
    account_id: &'a str,
    app_id: String,
    brand: &'a str,
    created_at: String,
    description: &'a Option<String>,
    device_arn: &'a str,
    device_token: &'a str,
    device_uuid: &'a str,
    event_listener: bool,
    geofence_events: bool,
    id: &'a str,
    is_deleted: bool,
    last_location_update: LastLocation<'a>,
    location_events: bool,
    location_listener: bool,
    metadata: &'a Option<Map<String, Value>>,
    model: &'a str,
    motion_events: bool,
    nearby_events: bool,
    os_version: &'a str,
    project_id: &'a str,
    sdk_version: &'a str,
    trips_events: bool,
    updated_at: String,
}

impl<'a> UserView<'a> {
    pub fn new(u: &'a User, tz: Option<Tz>) -> Self {
        let f = u;
        Self {
            account_id: &u.account_id,
            app_id: app_id(u),
            brand: &u.brand,
            created_at: u.created_at.format(tz),
            description: &u.description,
            device_arn: &u.device_arn,
            device_token: &u.device_token,
            device_uuid: &u.device_uuid,
            event_listener: f.event_listener,
            geofence_events: f.geofence_events,
            id: &u.id,
            is_deleted: u.is_deleted,
            last_location_update: LastLocation(u.last_location_update.as_ref().map(|l| LocationView::new(l, tz))),
            location_events: f.location_events,
            location_listener: f.location_listener,
            metadata: &u.metadata,
            model: &u.model,
            motion_events: f.motion_events,
            nearby_events: f.nearby_events,
            os_version: &u.os_version,
            project_id: &u.project_id,
            sdk_version: &u.sdk_version,
            trips_events: f.trips_events,
            updated_at: u.updated_at.format(tz),
        }
    }
}

/// [`UserView`] as a JSON value.
pub fn user_json(u: &User, tz: Option<Tz>) -> Value {
    serde_json::to_value(UserView::new(u, tz)).unwrap_or_else(|_| json!({}))
}

/// A page of users as `GET /v1/api/user/` answers it (fields sorted, as above).
#[derive(Debug, Serialize)]
pub struct UsersPage<'a> {
    pub account_id: &'a str,
    pub next_page: Option<usize>,
    pub pages: usize,
    pub prev_page: Option<usize>,
    /// As [`view_json`] renders them.
    pub users: Vec<Box<RawValue>>,
}

/// The creation response's `data`, exactly the fields of openapi.yaml's `UserCreated`.
pub fn created_json(u: &User) -> Value {
    let f = u;
    json!({
        "user_id": u.id,
        "app_id": app_id(u),
        "description": u.description,
        "geofence_events": f.geofence_events,
        "location_events": f.location_events,
        "trips_events": f.trips_events,
        "nearby_events": f.nearby_events,
        "location_listener": f.location_listener,
        "event_listener": f.event_listener,
        "metadata": u.metadata,
        "sdk_version": u.sdk_version,
        "project_id": u.project_id,
        "account_id": u.account_id,
    })
}
