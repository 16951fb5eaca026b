//! Domain logic, independent of HTTP: each function takes the store and the authenticated
//! project and returns records or an [`ApiError`](crate::error::ApiError).

pub mod export;
pub mod geofences;
pub mod groups;
pub mod history_pages;
pub mod insights;
pub mod keys;
pub mod list_pages;
pub mod locations;
pub mod nearby;
pub mod projects;
pub mod sequence;
pub mod settings;
pub mod streams;
pub mod trips;
pub mod users;
pub mod webhooks;
