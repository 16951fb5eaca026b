//! A stream's filter resolved against a project, trips included: the streams room cannot read
//! trips (the trip room publishes to it), so both transports (`waymark serve`'s streams and the
//! `streams-ws` function) resolve here.

use super::{Api, Trip, get};
use crate::domain::streams::{Filter, Matcher, Scope};
use crate::error::{ApiError, Kind};
use crate::project::Project;
use crate::store::Store;

/// A trip of the project, whichever API made it (404 otherwise).
pub async fn get_any(store: &dyn Store, p: &Project, id: &str) -> Result<Trip, ApiError> {
    match get(store, p, Api::V1, id).await {
        Err(e) if e.kind == Kind::NotFound => get(store, p, Api::V2, id).await,
        other => other,
    }
}

/// The filter's matcher: 404 when it names nothing of the project.
pub async fn resolve_filter(store: &dyn Store, p: &Project, filter: &Filter) -> Result<Matcher, ApiError> {
    Ok(match &filter.scope {
        Scope::Trip(t) => {
            let trip = get_any(store, p, t).await?;
            Matcher::trip(trip.id, trip.user_id, filter.types.clone())
        }
        _ => filter.resolve(store, p).await?,
    })
}
