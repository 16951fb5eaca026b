//! Domain logic, independent of HTTP: each function takes the store and the authenticated
//! project and returns records or an [`ApiError`](crate::error::ApiError).

pub mod erasure;
pub mod export;
pub mod geofences;
pub mod groups;
pub mod history_pages;
pub mod ingest;
pub mod insights;
pub mod keys;
pub mod list_pages;
pub mod locations;
pub mod nearby;
pub mod processor;
pub mod projects;
pub mod retention;
pub mod settings;
pub mod trips;
pub mod users;
pub mod webhooks;

/// Free text (names, descriptions, tags) is limited to [`users::MAX_TEXT`] bytes everywhere.
pub fn check_text(field: &str, v: &Option<String>) -> Result<(), crate::error::ApiError> {
    match v {
        Some(s) if s.len() > users::MAX_TEXT => {
            Err(crate::error::ApiError::field(field, format!("at most {} characters", users::MAX_TEXT)))
        }
        _ => Ok(()),
    }
}
