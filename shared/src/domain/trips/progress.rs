//! Trips moved by locations: what the events processor asks of trips for a range of new fixes
//! (origin/destination/stop reached and left, start location) and for late fixes (figures of
//! trips that ended recently recomputed from the whole history).

use super::gps::Fix;
use super::{Api, LATE_WINDOW_HOURS, LEAVE_MARGIN_M, Trip, TripEvent, TripState, UserTrip, WaypointKind};
use super::{event_puts, get_record, route, set_figures, trip_locations, trips_pk, user_trips_pk};
use crate::domain::geofences::events::event_id;
use crate::domain::history_pages::NewEntry;
use crate::domain::locations::Location;
use crate::domain::users::User;
use crate::domain::webhooks::HookEvent;
use crate::error::ApiError;
use crate::project::Project;
use crate::store::{Cond, Query, SkRange, Store, Table, WriteOp, from_item, to_item};
use crate::time::Timestamp;

/// Update waypoint progress from new fixes in `recorded_at` order, as far as the trip's online
/// judge accepts them (a fix that jumps is held until its successor confirms it). The judge
/// starts afresh after a pause: the phone may have gone anywhere meanwhile, so neither the last
/// fix nor the speed before the pause says where the next one may be.
pub(super) fn progress(trip: &mut Trip, fixes: &[Location]) {
    let intervals = trip.active_intervals(crate::domain::locations::latest_acceptable());
    let stretch = |t: Timestamp| intervals.iter().position(|(a, b)| *a <= t && t <= *b);
    let mut accepted = Vec::new();
    for f in fixes {
        if trip.gps.newest_at().is_some_and(|t| stretch(t) != stretch(f.recorded_at)) {
            accepted.extend(trip.gps.finish());
            trip.gps = super::gps::OnlineFilter::default();
        }
        accepted.extend(trip.gps.push(f));
    }
    reach(trip, &accepted);
}

/// Record reached/left events for accepted fixes, with ids derived from the trip, waypoint, kind
/// and fix (the same fixes give the same ids).
pub(super) fn reach(trip: &mut Trip, fixes: &[Fix]) {
    let mut events = Vec::new();
    for f in fixes {
        let mut seq = 0;
        for w in trip.waypoints.iter_mut() {
            let d = w.coordinates.distance_m(f.coordinates);
            let reached = if w.reached_at.is_none() && d <= f64::from(w.radius_m) {
                w.reached_at = Some(f.recorded_at);
                true
            } else if w.reached_at.is_some() && w.left_at.is_none() && d > f64::from(w.radius_m) + LEAVE_MARGIN_M {
                w.left_at = Some(f.recorded_at);
                false
            } else {
                continue;
            };
            w.updated_at = Timestamp::now();
            seq += 1;
            let ty = reach_event(w.kind, reached);
            let id = event_id(f.recorded_at, seq, &[&trip.id, &w.id, ty, &f.id]);
            events.push((id, ty, w.id.clone(), f.id.clone()));
        }
    }
    for (id, ty, wp, loc) in events {
        trip.push_event_id(id, ty, None, Some(wp), Some(loc));
    }
}

fn reach_event(kind: WaypointKind, reached: bool) -> &'static str {
    match (kind, reached) {
        (WaypointKind::Origin, true) => "trip:user_reached_origin",
        (WaypointKind::Origin, false) => "trip:user_left_origin",
        (WaypointKind::Destination, true) => "trip:user_reached_destination",
        (WaypointKind::Destination, false) => "trip:user_left_destination",
        (WaypointKind::Stop, true) => "trip:user_reached_stop",
        (WaypointKind::Stop, false) => "trip:user_left_stop",
    }
}

/// The webhook event type of a trip event, if it has one (docs/events.md, "Webhooks").
pub fn hook_type(event_type: &str) -> Option<&'static str> {
    Some(match event_type {
        "service:trip:created" => "trip.created",
        "trip:started" => "trip.started",
        "trip:paused" => "trip.paused",
        "trip:resumed" => "trip.resumed",
        "trip:completed" => "trip.ended",
        "trip:user_reached_origin" => "trip.origin_reached",
        "trip:user_left_origin" => "trip.origin_left",
        "trip:user_reached_stop" => "trip.stop_arrived",
        "trip:user_left_stop" => "trip.stop_departed",
        "trip:user_reached_destination" => "trip.destination_reached",
        "trip:user_left_destination" => "trip.destination_left",
        _ => return None,
    })
}

/// A trip event as a webhook message: the event as the API lists it, the user and the trip.
pub(super) fn hook_event(trip: &Trip, e: &TripEvent, user: Option<&User>) -> Option<HookEvent> {
    let kind = hook_type(&e.event_type)?;
    let trip_json = match trip.api {
        // No ETA in webhook messages: it is an estimate of the moment, not an event's.
        Api::V1 => super::json::trip_v1_json(trip, "", None),
        Api::V2 => super::json::trip_v2_json(trip, user, "", None),
    };
    let mut data = super::json::event_json(e);
    data["user"] = crate::domain::webhooks::user_brief(user, e.user_id.as_deref());
    data["trip"] = trip_json;
    Some(HookEvent { id: e.id.clone(), kind, user_id: e.user_id.clone(), created_at: e.created_at, data })
}

/// What new fixes do to the user's trips: trip records to write (checked on their version, in
/// the processor's transaction), their new event items, and the events for webhooks.
#[derive(Default)]
pub struct TripPlan {
    pub states: Vec<WriteOp>,
    /// The copies among `states` in users' trip-events lists, which the transaction that writes
    /// them must count (`history_pages::counting`).
    pub counted: Vec<NewEntry>,
    pub hooks: Vec<HookEvent>,
}

/// Plan the effect of `fixes` (new, past the processor's watermark, in order) and of late fixes
/// recorded within the `late` ranges (before the watermark) on the user's started trips. Webhook
/// events are built only when `hooked` (an endpoint listens).
pub async fn plan(
    store: &dyn Store,
    p: &Project,
    user: &User,
    fixes: &[Location],
    late: &[(Timestamp, Timestamp)],
    hooked: bool,
) -> Result<TripPlan, ApiError> {
    let pk = user_trips_pk(&p.project_id, &user.id);
    let entries = store.query(Table::Main, &Query::new(&pk, SkRange::All)).await?.items;
    let now = Timestamp::now();
    let days = crate::domain::settings::retention_days(store, &p.project_id).await?;
    let mut out = TripPlan::default();
    for e in entries {
        let e: UserTrip = from_item(e)?;
        let Some(mut trip) = get_record(store, p, e.api, &e.trip_id).await? else {
            out.states.push(WriteOp::Delete { table: Table::Main, pk: pk.clone(), sk: e.trip_id, cond: Cond::None });
            continue;
        };
        if trip.ended_at.is_some_and(|end| (now.0 - end.0).num_hours() >= LATE_WINDOW_HOURS) {
            out.states.push(WriteOp::Delete { table: Table::Main, pk: pk.clone(), sk: e.trip_id, cond: Cond::None });
            continue;
        }
        // An active trip runs until now, and fixes may be a little ahead of the server's clock.
        let intervals = trip.active_intervals(crate::domain::locations::latest_acceptable());
        let inside: Vec<Location> = fixes
            .iter()
            .filter(|l| intervals.iter().any(|(a, b)| *a <= l.recorded_at && l.recorded_at <= *b))
            .cloned()
            .collect();
        let late = late.iter().any(|(s, u)| intervals.iter().any(|(a, b)| s <= b && a <= u));
        if inside.is_empty() && !late {
            continue;
        }
        if let Some(g) = &e.gps {
            trip.gps = g.clone();
        }
        let mut t = trip.clone();
        // Once its first fixes may have expired (retention), an ended trip's figures stay as
        // stored: recomputing them from what remains would shrink them.
        let expired = match trip.started_at {
            Some(s) if trip.state == TripState::Ended => {
                crate::domain::settings::may_have_expired(store, &p.project_id, s).await?
            }
            _ => false,
        };
        if expired {
            continue;
        }
        if trip.state == TripState::Ended {
            // Late fixes: recompute the stored figures from the whole history.
            let end = trip.ended_at.unwrap_or(now);
            let locs = trip_locations(store, p, &trip, now).await?;
            let r = route::analyse(&locs, &trip.pause_intervals(end));
            set_figures(&mut t, &r, end);
            if t.start_location.as_ref().is_none_or(|s| locs.first().is_some_and(|f| f.recorded_at < s.recorded_at)) {
                t.start_location = locs.first().cloned();
            }
            t.end_location = locs.last().cloned();
        } else if !inside.is_empty() {
            if t.start_location.as_ref().is_none_or(|s| inside[0].recorded_at < s.recorded_at) {
                t.start_location = Some(inside[0].clone());
            }
            progress(&mut t, &inside);
        }
        if t.gps != trip.gps {
            // Checked to exist: a trip that left the user's list meanwhile (ended long ago,
            // reassigned, deleted) does not come back; the pass reads again.
            let entry = UserTrip { gps: Some(t.gps.clone()), ..e.clone() };
            out.states.push(WriteOp::Put {
                table: Table::Main,
                item: to_item(&pk, &e.trip_id, &entry)?,
                cond: Cond::Exists,
            });
        }
        let record = Trip { gps: trip.gps.clone(), ..t.clone() };
        if record == trip {
            continue;
        }
        t.version += 1;
        t.updated_at = now;
        // The record read here holds no events: the new ones go after the stored ones.
        let (event_ops, counted) = event_puts(p, &mut t, 0, trip.event_count, days)?;
        out.counted.extend(counted);
        out.states.push(WriteOp::Put {
            table: Table::Main,
            item: to_item(&trips_pk(&p.project_id, e.api), &t.id, &t)?,
            cond: Cond::Equals("version", trip.version.into()),
        });
        out.states.extend(event_ops);
        if hooked {
            for ev in &t.events {
                out.hooks.extend(hook_event(&t, ev, Some(user)));
            }
        }
    }
    Ok(out)
}
