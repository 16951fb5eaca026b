//! Bundles the console's assets into the function: every file of `assets/` (the page itself) and
//! the map libraries from the npm registry (`../npm.rs`: installed once into `.tools`, SHA-256
//! checked): Leaflet, leaflet.markercluster (clustering) and Leaflet-Geoman (drawing and editing
//! shapes). Writes `assets.rs`, the table `ASSETS` of (file name, bytes) the router serves.
#![allow(clippy::disallowed_methods)] // build scripts read their own settings from the environment

use std::path::PathBuf;

#[path = "../npm.rs"]
mod npm;

fn file(from: &'static str, to: &'static str, sha256: &'static str) -> npm::File {
    npm::File { from, to, sha256 }
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=../npm.rs");
    println!("cargo:rerun-if-changed=assets");
    // A position-dependent executable, as every function's (see ../link.rs).
    println!("cargo::rustc-link-arg-bins=-no-pie");
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let root = manifest.join("../..");
    let leaflet = [
        file("dist/leaflet.js", "leaflet.js", "db49d009c841f5ca34a888c96511ae936fd9f5533e90d8b2c4d57596f4e5641a"),
        file("dist/leaflet.css", "leaflet.css", "a7837102824184820dfa198d1ebcd109ff6d0ff9a2672a074b9a1b4d147d04c6"),
    ];
    let cluster = [
        file(
            "dist/leaflet.markercluster.js",
            "leaflet.markercluster.js",
            "1e4e1d22972a3926f48598e0caf14e3fe7049835d428a344fed4f9e3665b3508",
        ),
        file(
            "dist/MarkerCluster.css",
            "MarkerCluster.css",
            "614dea0a98ff3f4ead74f04918f6b1d1b9ba435c25b5fc23b21a394d1e3e4d87",
        ),
        file(
            "dist/MarkerCluster.Default.css",
            "MarkerCluster.Default.css",
            "61258232d98d64dc2a7b1e02130d67421bc5b9bda5994eef70228ff97570c170",
        ),
    ];
    let geoman = [
        file(
            "dist/leaflet-geoman.min.js",
            "leaflet-geoman.js",
            "20d0ba38069526be959287b8ae13234f660f92db28de86782ebcad028dda9ed3",
        ),
        file(
            "dist/leaflet-geoman.css",
            "leaflet-geoman.css",
            "a0df8e0f6301f9f71d772b2c61913bb9094ae0735fd2223ccd1aecd871ea250c",
        ),
    ];
    npm::bundle(&root, &out, "leaflet", "1.9.4", None, &leaflet);
    npm::bundle(&root, &out, "leaflet.markercluster", "1.5.3", None, &cluster);
    npm::bundle(&root, &out, "@geoman-io/leaflet-geoman-free", "2.20.2", None, &geoman);

    let mut table = String::from(
        "/// The console's assets: (file name, bytes), in name order.\npub const ASSETS: &[(&str, &[u8])] = &[\n",
    );
    let mut names: Vec<(String, PathBuf)> =
        leaflet.iter().chain(&cluster).chain(&geoman).map(|f| (f.to.to_owned(), out.join(f.to))).collect();
    for entry in std::fs::read_dir(manifest.join("assets")).expect("reading assets/") {
        let path = entry.expect("assets entry").path();
        if path.is_file() {
            println!("cargo:rerun-if-changed={}", path.display());
            let name = path.file_name().and_then(|n| n.to_str()).expect("an asset's name is UTF-8").to_owned();
            assert!(!names.iter().any(|(n, _)| *n == name), "assets/{name} would hide a bundled library's file");
            names.push((name, path));
        }
    }
    names.sort();
    for (name, path) in names {
        table.push_str(&format!("    ({name:?}, include_bytes!({:?})),\n", path.display().to_string()));
    }
    table.push_str("];\n");
    std::fs::write(out.join("assets.rs"), table).expect("writing assets.rs");
}
