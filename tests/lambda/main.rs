//! Lambda packaging, checked against the code: template.yaml (tables, functions, routes,
//! environment, policies) and the sample events in `events/`, fed to each function's router as
//! `lambda_http` would. The real runtime loop is exercised in functions/users/tests/runtime.rs.

mod events;
mod support;
mod template;
