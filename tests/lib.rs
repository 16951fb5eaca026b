//! Black-box tests of the Waymark API live in `api/`; this crate has no library code.
#![allow(clippy::disallowed_methods)] // tests and tools read their own settings from the environment
