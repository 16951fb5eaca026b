//! Controls: start, pause, resume and end, what each may follow, and what it writes.

use super::*;
use crate::domain::sequence;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Start,
    Pause,
    Resume,
    End,
}

impl Action {
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        serde_json::from_value(Value::String(s.to_owned()))
            .map_err(|_| ApiError::field("action", format!("'{s}' is not one of start, pause, resume, end")))
    }
    /// The body field that may carry the time of the move.
    pub fn time_field(self) -> &'static str {
        match self {
            Action::Start => "started_at",
            Action::Pause => "paused_at",
            Action::Resume => "resumed_at",
            Action::End => "ended_at",
        }
    }
    /// Of the times given as `[started_at, paused_at, resumed_at, ended_at]`, the one for this
    /// action (the others are ignored).
    pub fn pick(self, times: [Option<Timestamp>; 4]) -> Option<Timestamp> {
        times[self as usize]
    }
    fn verb(self) -> &'static str {
        match self {
            Action::Start => "start",
            Action::Pause => "pause",
            Action::Resume => "resume",
            Action::End => "end",
        }
    }
}

/// The time of the latest move so far (a control may not go back before it).
fn last_move(t: &Trip) -> Option<Timestamp> {
    let mut last = t.started_at;
    for p in &t.pauses {
        last = last.max(Some(p.paused_at)).max(p.resumed_at);
    }
    last.max(t.ended_at)
}

/// Move a trip through its lifecycle: created → started → paused ↔ resumed → ended.
pub async fn control(
    store: &dyn Store,
    p: &Project,
    api: Api,
    trip_id: &str,
    action: Action,
    at: Option<Timestamp>,
) -> Result<Trip, ApiError> {
    let given = at;
    if given.is_some_and(|t| (t.0 - Timestamp::now().0).num_seconds() > CLOCK_SKEW_SECONDS) {
        return Err(ApiError::field(action.time_field(), "is in the future"));
    }
    let mut last_fix: Option<Location> = None;
    let mut route: Option<route::Route> = None;
    for _ in 0..30 {
        let mut snapshot = get_or_deleted(store, p, api, trip_id).await?;
        legal(&snapshot, action)?;
        // Without a given time the move happens now, taken afresh on each attempt: a concurrent
        // move that won the race may have happened after this request began.
        let at = given.unwrap_or_else(|| Timestamp::now().max(last_move(&snapshot).unwrap_or(Timestamp::now())));
        if last_move(&snapshot).is_some_and(|l| at < l) {
            return Err(ApiError::field(action.time_field(), "is before the trip's previous move"));
        }
        match action {
            Action::Start => {
                let user = snapshot.user_id.as_deref().ok_or_else(|| {
                    ApiError::conflict("trip_id: the trip has no user; assign one with an update before starting it")
                })?;
                last_fix = users::get(store, p, user).await?.and_then(|u| u.last_location_update);
            }
            Action::End => {
                // The judge as the user's passes left it (this write moves the user's watermark,
                // so no pass commits in between).
                if let Some(g) = super::judge_of(store, p, &snapshot).await? {
                    snapshot.gps = g;
                }
                let mut ended = snapshot.clone();
                ended.ended_at = Some(at);
                let locs = trip_locations(store, p, &ended, at).await?;
                last_fix = locs.last().cloned();
                route = Some(route::analyse(&locs, &ended.pause_intervals(at)));
            }
            _ => {}
        }
        // The control's place in its user's sequence (domain::sequence): its id comes after every
        // message of the user already out, and the user's watermark moves past it in the same
        // write, so a fix recorded before it and sent after it fires nothing out of order.
        let (place, sequence_op) = match snapshot.user_id.as_deref() {
            Some(user) => {
                let wm = sequence::read(store, p, user).await?;
                let t = sequence::place(&wm, at);
                (t, Some(sequence::put(p, user, &sequence::past(&wm, t), &wm)?))
            }
            None => (at, None),
        };
        let result = modify_once(store, p, api, &snapshot, &mut |trip: &mut Trip| {
            apply(trip, action, at, place, last_fix.as_ref(), route.as_ref());
            let mut ops = index_ops(p, trip, action);
            ops.extend(sequence_op.clone());
            Ok(ops)
        })
        .await;
        match result {
            Ok(Some(trip)) => return Ok(trip),
            Ok(None) => continue, // lost a race: re-read and re-check legality
            Err(e) => return Err(e),
        }
    }
    Err(ApiError::conflict(format!("trip_id: trip '{trip_id}' is being changed by other requests; retry")))
}

pub(super) async fn get_or_deleted(store: &dyn Store, p: &Project, api: Api, trip_id: &str) -> Result<Trip, ApiError> {
    match get(store, p, api, trip_id).await {
        Err(e) if e.is_not_found() && is_deleted(store, p, trip_id).await? => {
            Err(ApiError::conflict(format!("trip_id: trip '{trip_id}' is deleted")))
        }
        other => other,
    }
}

/// One version-checked write of `snapshot` changed by `change`; `None` when another write got in.
pub(super) async fn modify_once(
    store: &dyn Store,
    p: &Project,
    api: Api,
    snapshot: &Trip,
    change: &mut impl FnMut(&mut Trip) -> Result<Vec<WriteOp>, ApiError>,
) -> Result<Option<Trip>, ApiError> {
    let mut trip = snapshot.clone();
    let mut ops = change(&mut trip)?;
    if trip.user_id != snapshot.user_id {
        let (from, to) = (snapshot.user_id.as_deref(), trip.user_id.as_deref());
        ops.extend(by_user::move_ops(&p.project_id, api, &trip.id, from, to));
    }
    trip.version += 1;
    trip.updated_at = Timestamp::now();
    let days = crate::domain::settings::retention_days(store, &p.project_id).await?;
    let (events, counted) = event_puts(p, &mut trip, snapshot.events.len(), snapshot.event_count, days)?;
    ops.extend(events);
    let item = to_item(&trips_pk(&p.project_id, api), &trip.id, &trip)?;
    ops.insert(0, WriteOp::Put { table: Table::Main, item, cond: Cond::Equals("version", snapshot.version.into()) });
    let messages = hook_ops(store, p, &trip, snapshot.events.len(), &mut ops).await?;
    match history_pages::counting(store, Table::Main, &counted, true, store.transact(ops)).await {
        Ok(()) => {
            crate::domain::streams::connections::publish(store, &p.project_id, &messages).await;
            Ok(Some(trip))
        }
        Err(StoreError::ConditionFailed) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

fn legal(t: &Trip, action: Action) -> Result<(), ApiError> {
    use TripState::*;
    let ok = matches!(
        (t.state, action),
        (Created, Action::Start)
            | (Started | Resumed, Action::Pause)
            | (Paused, Action::Resume)
            | (Started | Paused | Resumed, Action::End)
    );
    if !ok {
        return Err(ApiError::conflict(format!(
            "action: cannot {} a trip that is {}",
            action.verb(),
            t.state.as_str()
        )));
    }
    if action == Action::Pause && t.pauses.len() >= MAX_PAUSES {
        return Err(ApiError::conflict(format!("action: a trip can be paused at most {MAX_PAUSES} times")));
    }
    Ok(())
}

/// Apply `action` at `at` (the trip's times); its events take their ids at `place` (see
/// `domain::sequence`).
fn apply(
    trip: &mut Trip,
    action: Action,
    at: Timestamp,
    place: Timestamp,
    fix: Option<&Location>,
    route: Option<&route::Route>,
) {
    match action {
        Action::Start => {
            trip.state = TripState::Started;
            trip.started_at = Some(at);
            // The user's last fix names where the trip started, but it was recorded before the
            // start: it moves no waypoint.
            trip.push_event_at(place, "trip:started", fix.map(|f| f.id.clone()));
        }
        Action::Pause => {
            trip.state = TripState::Paused;
            trip.pauses.push(Pause { paused_at: at, resumed_at: None });
            trip.hook_only_event_at(place, "trip:paused");
        }
        Action::Resume => {
            trip.state = TripState::Resumed;
            if let Some(p) = trip.pauses.last_mut() {
                p.resumed_at = Some(at);
            }
            trip.hook_only_event_at(place, "trip:resumed");
        }
        Action::End => {
            if let Some(p) = trip.pauses.last_mut().filter(|p| p.resumed_at.is_none()) {
                p.resumed_at = Some(at);
            }
            // A fix held back for its successor is judged now, on its predecessor alone.
            if let Some(held) = trip.gps.finish() {
                progress::reach(trip, &[held]);
            }
            trip.state = TripState::Ended;
            trip.ended_at = Some(at);
            if let Some(r) = route {
                set_figures(trip, r, at);
            }
            trip.end_location = fix.cloned();
            trip.push_event_at(place, "trip:completed", fix.map(|f| f.id.clone()));
        }
    }
}

pub(crate) fn set_figures(trip: &mut Trip, r: &route::Route, end: Timestamp) {
    trip.distance_m = Some(r.distance_m);
    trip.elevation_gain_m = r.elevation_gain_m;
    trip.duration_s = trip.started_at.map(|s| route::active_seconds(s, end, &trip.pause_intervals(end)));
}

/// Index writes for a move: a started trip enters the user's list of trips that locations move.
fn index_ops(p: &Project, trip: &Trip, action: Action) -> Vec<WriteOp> {
    let (Action::Start, Some(user)) = (action, &trip.user_id) else { return Vec::new() };
    let entry = UserTrip { trip_id: trip.id.clone(), api: trip.api, gps: None };
    match to_item(&user_trips_pk(&p.project_id, user), &trip.id, &entry) {
        Ok(item) => vec![WriteOp::Put { table: Table::Main, item, cond: Cond::None }],
        Err(_) => Vec::new(),
    }
}

/// Create a trip for a user and start it at once (for a user with no planned trip).
pub async fn quick(store: &dyn Store, p: &Project, api: Api, input: NewTrip) -> Result<Trip, ApiError> {
    if input.user_id.is_none() {
        return Err(ApiError::field("user_id", "is required for a quick trip"));
    }
    let trip = create(store, p, api, input).await?;
    control(store, p, api, &trip.id, Action::Start, None).await
}
