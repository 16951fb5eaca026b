//! Domain logic, independent of HTTP: each function takes the store and the authenticated
//! project and returns records or an [`ApiError`](crate::error::ApiError).

pub mod geofences;
pub mod groups;
pub mod ingest;
pub mod locations;
pub mod projects;
pub mod trips;
pub mod users;
