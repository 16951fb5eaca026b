//! Lambda packaging, checked against the code: template.yaml (tables, functions, routes,
//! environment, policies, stream and schedule sources) and the sample events in `events/`, fed to
//! each function's router as `lambda_http` would, or (streams, schedules) to its handler. The
//! real runtime loop is exercised in functions/users/tests/runtime.rs.
#![allow(clippy::disallowed_methods)] // tests and tools read their own settings from the environment

mod events;
#[allow(dead_code)]
#[path = "../api/gps_truth.rs"]
mod gps_truth;
mod long_trip;
mod streams;
mod support;
mod template;
#[allow(dead_code)]
#[path = "../api/trace.rs"]
mod trace;
mod websocket;
