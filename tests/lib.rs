//! Black-box tests of the Waymark API live in `api/`; this crate has no library code.
