//! The API suite: one binary, each test isolated in its own project, each run on both backends.
#![allow(clippy::disallowed_methods)] // tests and tools read their own settings from the environment

mod helpers;

mod insights;
mod insights_aggregate;
mod insights_life;
mod insights_rules;
mod isolation;
mod keys;
mod life;

mod auth;
mod capacity;
mod compression;
mod conformance;
mod erasure;
mod errors;
mod eta_eval;
mod event_order;
mod expiry;
mod geofence_events;
mod geofence_index;
mod geofence_search_totals;
mod geofences;
mod gps_truth;
mod gpx_export;
mod groups;
mod history_pages;
mod list_pages;
mod locations;
mod moving;
mod processor;
mod receiver;
mod rendered;
mod retention;
mod roam_clients;
mod roam_params;
mod roam_paths;
mod search;
mod sharing;
mod stays_real;
mod store;
mod stream_clients;
mod stream_tokens;
mod streams;
mod trace;
mod trip_events;
mod trip_gps;
mod trip_trace;
mod trip_truth;
mod trips;
mod trips_by_user;
mod trips_v2;
mod users;
mod webhooks;
mod ws_connections;
