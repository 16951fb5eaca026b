//! Lambda packaging, checked against the code: template.yaml (tables, functions, routes,
//! environment, policies, stream and schedule sources) and the sample events in `events/`, fed to
//! each function's router as `lambda_http` would, or (streams, schedules) to its handler. The
//! real runtime loop is exercised in functions/users/tests/runtime.rs.

mod events;
mod streams;
mod support;
mod template;
