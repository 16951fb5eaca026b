//! Build script of every Lambda function package: its binaries link as position-dependent
//! executables. A position-independent one carries ~45,000 relative relocations (mostly
//! chrono-tz's tables of time zones): 1 MB of the binary, and 1.3 MB of tables the loader writes
//! at every cold start. What this gives up: the executable's own code and data load at a fixed
//! address (address randomisation still applies to its stack, heap and libraries).
fn main() {
    println!("cargo::rerun-if-changed=../link.rs");
    println!("cargo::rustc-link-arg-bins=-no-pie");
}
