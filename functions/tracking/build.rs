//! Bundles the map library (Leaflet, from the npm registry) into the function's assets
//! (`../npm.rs`: installed once into `.tools`, SHA-256 checked). `WAYMARK_LEAFLET_DIR` may point
//! at an unpacked `leaflet` package instead.
#![allow(clippy::disallowed_methods)] // tests and tools read their own settings from the environment

use std::path::PathBuf;

#[path = "../npm.rs"]
mod npm;

const LEAFLET_VERSION: &str = "1.9.4";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=../npm.rs");
    // A position-dependent executable, as every function's (see ../link.rs).
    println!("cargo::rustc-link-arg-bins=-no-pie");
    println!("cargo:rerun-if-env-changed=WAYMARK_LEAFLET_DIR");
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let dir = std::env::var_os("WAYMARK_LEAFLET_DIR").map(PathBuf::from);
    npm::bundle(&manifest.join("../.."), &out, "leaflet", LEAFLET_VERSION, dir, &LEAFLET);
}

/// The files taken from `leaflet@1.9.4`, with their SHA-256, so a tampered download fails the build.
pub const LEAFLET: [npm::File; 2] = [
    npm::File {
        from: "dist/leaflet.js",
        to: "leaflet.js",
        sha256: "db49d009c841f5ca34a888c96511ae936fd9f5533e90d8b2c4d57596f4e5641a",
    },
    npm::File {
        from: "dist/leaflet.css",
        to: "leaflet.css",
        sha256: "a7837102824184820dfa198d1ebcd109ff6d0ff9a2672a074b9a1b4d147d04c6",
    },
];
