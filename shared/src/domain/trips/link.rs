//! A trip's tracking link: when it stops working (the trip is deleted, or ended longer ago than
//! the project's `tracking_link_ttl_hours`) and its revocation (a new token; the old one's item
//! goes in the same transaction, so the old link is a 404 from the moment the call returns).

use super::{Api, TrackingRef, Trip, get_record, modify, tracking_pk};
use crate::domain::settings::{self, ProjectSettings};
use crate::error::ApiError;
use crate::ids::random_hex;
use crate::project::Project;
use crate::store::{Cond, Store, Table, WriteOp, to_item};
use crate::time::Timestamp;

/// Whether the link of `trip` has expired at `now`: only an ended trip's does, `ttl` hours after
/// its end.
pub fn expired(trip: &Trip, s: ProjectSettings, now: Timestamp) -> bool {
    trip.ended_at.is_some_and(|end| now.0 >= end.0 + chrono::Duration::hours(i64::from(s.tracking_link_ttl_hours)))
}

/// The trip a tracking token shows at `now`: None when the token is unknown or malformed, the
/// trip deleted, the token revoked or the link expired (all look the same to the page).
pub async fn live_by_token(store: &dyn Store, token: &str, now: Timestamp) -> Result<Option<Trip>, ApiError> {
    let Some(trip) = super::by_token(store, token).await? else { return Ok(None) };
    if trip.is_deleted || trip.tracking_token != token {
        return Ok(None);
    }
    if trip.ended_at.is_some() && expired(&trip, settings::cached(store, &trip.project_id).await?, now) {
        return Ok(None);
    }
    Ok(Some(trip))
}

/// Issue a new tracking token for a trip of either API (v1/v3 or v2): the old link stops at once.
pub async fn revoke(store: &dyn Store, p: &Project, trip_id: &str) -> Result<Trip, ApiError> {
    let api = if crate::ids::is_id(trip_id) && get_record(store, p, Api::V1, trip_id).await?.is_some() {
        Api::V1
    } else {
        Api::V2
    };
    modify(store, p, api, trip_id, |trip| {
        let old = std::mem::replace(&mut trip.tracking_token, random_hex(16));
        let to = TrackingRef { project_id: p.project_id.clone(), api, trip_id: trip.id.clone() };
        Ok(vec![
            WriteOp::Delete { table: Table::Main, pk: tracking_pk(&old), sk: "-".into(), cond: Cond::None },
            WriteOp::Put {
                table: Table::Main,
                item: to_item(&tracking_pk(&trip.tracking_token), "-", &to)?,
                cond: Cond::NotExists,
            },
        ])
    })
    .await
}

/// The link to a v1/v3 trip's GPX (Roam's export `download_url`): `<tracking link>/gpx`, the
/// same token, so it works without a key and stops exactly when the tracking link does (revoked,
/// trip deleted, or `tracking_link_ttl_hours` after the end). A link already dead is refused
/// here rather than handed out.
pub async fn gpx_url(
    store: &dyn Store,
    p: &Project,
    base: &str,
    trip_id: &str,
    now: Timestamp,
) -> Result<String, ApiError> {
    let trip = super::get(store, p, Api::V1, trip_id).await?;
    if trip.is_deleted {
        return Err(ApiError::not_found(format!("trip_id: trip '{trip_id}' is deleted")));
    }
    let s = settings::cached(store, &p.project_id).await?;
    if expired(&trip, s, now) {
        return Err(ApiError::conflict(format!(
            "trip_id: the trip's links expired {} hours after it ended (tracking_link_ttl_hours in the project settings); \
             GET /v1/api/trips/gpx/ answers its GPX with the key",
            s.tracking_link_ttl_hours
        )));
    }
    Ok(format!("{}/gpx", super::view::tracking_url(base, &trip)))
}
