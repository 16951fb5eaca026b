//! Reading a trip's fixes and its summary.

use super::*;

/// The trip's locations inside its active time up to `now`, pauses excluded, oldest first.
pub async fn trip_locations(
    store: &dyn Store,
    p: &Project,
    trip: &Trip,
    now: Timestamp,
) -> Result<Vec<Location>, ApiError> {
    trip_locations_since(store, p, trip, Timestamp(chrono::DateTime::<chrono::Utc>::MIN_UTC), now).await
}

/// [`trip_locations`] recorded at `since` or later.
pub async fn trip_locations_since(
    store: &dyn Store,
    p: &Project,
    trip: &Trip,
    since: Timestamp,
    now: Timestamp,
) -> Result<Vec<Location>, ApiError> {
    trip_records(store, p, trip, since, now, |l: &Location| l.recorded_at).await
}

/// [`trip_locations`] as the figures read them ([`fix::TripFix`]): a summary's long read.
pub async fn trip_fixes(
    store: &dyn Store,
    p: &Project,
    trip: &Trip,
    now: Timestamp,
) -> Result<Vec<fix::TripFix>, ApiError> {
    let since = Timestamp(chrono::DateTime::<chrono::Utc>::MIN_UTC);
    trip_records(store, p, trip, since, now, |l: &fix::TripFix| l.recorded_at).await
}

async fn trip_records<T: serde::de::DeserializeOwned + Send + 'static>(
    store: &dyn Store,
    p: &Project,
    trip: &Trip,
    since: Timestamp,
    now: Timestamp,
    at: impl Fn(&T) -> Timestamp,
) -> Result<Vec<T>, ApiError> {
    let (Some(user), Some(start)) = (&trip.user_id, trip.started_at) else { return Ok(Vec::new()) };
    let start = start.max(since);
    let end = trip.ended_at.unwrap_or(now);
    if end <= start {
        return Ok(Vec::new());
    }
    // The two halves of the trip's time, read at once where the store can (a long trip's fixes
    // are most of its summary's read), cut at a whole millisecond as ids count time (no half may
    // come out empty or reversed).
    let mid = chrono::DateTime::from_timestamp_millis((start.0.timestamp_millis() + end.0.timestamp_millis()) / 2)
        .unwrap_or(start.0);
    let qs: Vec<Query> = [(start.0, mid), (mid, end.0 + chrono::Duration::milliseconds(1))]
        .into_iter()
        .filter(|(a, b)| a.timestamp_millis() < b.timestamp_millis())
        .map(|(start, end)| {
            let (lo, hi) = id_range(&DateRange { start, end });
            Query::new(locations_pk(&p.project_id, user), SkRange::Between(lo, hi))
        })
        .collect();
    let intervals = trip.active_intervals(end);
    let mut locs: Vec<T> = query_as_ranges(store, Table::Locations, &qs).await?;
    locs.retain(|l| intervals.iter().any(|(a, b)| *a <= at(l) && at(l) <= *b));
    Ok(locs)
}

/// Resolve a tracking token to its trip (None when unknown or the trip is deleted).
pub async fn by_token(store: &dyn Store, token: &str) -> Result<Option<Trip>, ApiError> {
    if token.len() != 32 || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(None);
    }
    let Some(r) = get_as::<TrackingRef>(store, Table::Main, &tracking_pk(token), "-").await? else { return Ok(None) };
    let Some(mut trip) = get_as::<Trip>(store, Table::Main, &trips_pk(&r.project_id, r.api), &r.trip_id).await? else {
        return Ok(None);
    };
    let p = Project {
        project_id: r.project_id,
        account_id: trip.account_id.clone(),
        kind: crate::project::KeyKind::Secret,
    };
    load_events(store, &p, &mut trip).await?;
    Ok(Some(trip))
}

/// Everything a summary reports, computed from the trip's locations now.
pub struct Summary {
    pub trip: Trip,
    pub route: route::Route,
    pub distance_m: f64,
    pub duration_s: i64,
    /// The moment "now" meant (the end of a trip under way).
    pub computed_at: Timestamp,
}

pub async fn summary(store: &dyn Store, p: &Project, api: Api, trip_id: &str) -> Result<Summary, ApiError> {
    let trip = get(store, p, api, trip_id).await?;
    let now = Timestamp::now();
    let end = trip.ended_at.unwrap_or(now);
    let locs = trip_fixes(store, p, &trip, now).await?;
    let mut route = route::analyse_owned(locs, &trip.pause_intervals(end));
    let duration_s = trip.started_at.map(|s| route::active_seconds(s, end, &trip.pause_intervals(end))).unwrap_or(0);
    // Fixes may have expired (retention): the figures stored at the end were taken from all of
    // them. (A trip under way has none stored yet and is measured from what remains.)
    let mut distance_m = route.distance_m;
    if let (Some(d), Some(start)) = (trip.distance_m, trip.started_at)
        && crate::domain::settings::may_have_expired(store, &p.project_id, start).await?
    {
        distance_m = d;
        route.elevation_gain_m = trip.elevation_gain_m;
    }
    Ok(Summary { distance_m, duration_s, route, trip, computed_at: now })
}
