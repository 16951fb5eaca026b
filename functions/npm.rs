//! Bundling a pinned npm package's files into a build script's `OUT_DIR` (the tracking page's
//! and the console's map libraries). Included by those build scripts as a module
//! (`#[path = "../npm.rs"] mod npm;`), so a build script needs no dependency.
//!
//! A package is not committed: the first build installs the pinned version with npm into
//! `<workspace>/.tools/<name>-<version>` (gitignored) and checks the SHA-256 of the files taken;
//! later builds reuse that folder and need no network.
#![allow(clippy::disallowed_methods)] // build scripts read their own settings from the environment

use std::path::{Path, PathBuf};
use std::process::Command;

/// A file of a package: its path inside the package, the name it gets in `OUT_DIR` and its SHA-256.
pub struct File {
    pub from: &'static str,
    pub to: &'static str,
    pub sha256: &'static str,
}

/// Copy `files` of `package@version` into `out`, installing the package into `.tools` under
/// `workspace` first when it is not there; `dir` overrides where the unpacked package is.
pub fn bundle(workspace: &Path, out: &Path, package: &str, version: &str, dir: Option<PathBuf>, files: &[File]) {
    let root = match dir {
        Some(d) => d,
        None => {
            let folder = workspace.join(".tools").join(format!("{}-{version}", package.replace(['/', '@'], "_")));
            let root = folder.join("node_modules").join(package);
            if !files.iter().all(|f| root.join(f.from).is_file()) {
                install(&folder, package, version);
            }
            root
        }
    };
    for f in files {
        let src = root.join(f.from);
        println!("cargo:rerun-if-changed={}", src.display());
        let bytes = std::fs::read(&src).unwrap_or_else(|e| panic!("reading {}: {e}", src.display()));
        let got = sha256_hex(&bytes);
        assert_eq!(
            got,
            f.sha256,
            "{} is not {package}@{version}'s (sha256 {got}); delete the folder to fetch it again",
            src.display()
        );
        std::fs::write(out.join(f.to), &bytes).expect("writing to OUT_DIR");
    }
}

/// `npm install <package>@<pinned>` into a fresh folder beside `dir`, then renamed into place, so
/// two builds running at once never see a half-written install.
fn install(dir: &Path, package: &str, version: &str) {
    let parent = dir.parent().expect("install folder has a parent");
    std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("creating {}: {e}", parent.display()));
    let tmp = parent.join(format!(".install-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).expect("creating a temporary install folder");
    let status = Command::new("npm")
        .args(["install", "--prefix"])
        .arg(&tmp)
        .args(["--no-audit", "--no-fund", "--loglevel=error", "--ignore-scripts"])
        .arg(format!("{package}@{version}"))
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!(
            "`npm install {package}@{version}` failed ({s}); the pages bundle their map libraries from the npm \
             registry on the first build"
        ),
        Err(e) => panic!(
            "npm is needed to fetch {package}@{version} for the pages ({e}); install Node.js and npm \
             (apt-get install npm)"
        ),
    }
    if std::fs::rename(&tmp, dir).is_err() {
        // Another build installed it first.
        let _ = std::fs::remove_dir_all(&tmp);
    }
}

fn sha256_hex(data: &[u8]) -> String {
    sha256(data).iter().map(|b| format!("{b:02x}")).collect()
}

/// A small SHA-256 (FIPS 180-4), so the build script needs no dependency.
fn sha256(data: &[u8]) -> [u8; 32] {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
        0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
        0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
        0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
        0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
        0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
        0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] =
        [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    for chunk in msg.chunks(64) {
        let mut w = [0u32; 64];
        for (i, word) in chunk.chunks(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16].wrapping_add(s0).wrapping_add(w[i - 7]).wrapping_add(s1);
        }
        let mut v = h;
        for i in 0..64 {
            let s1 = v[4].rotate_right(6) ^ v[4].rotate_right(11) ^ v[4].rotate_right(25);
            let ch = (v[4] & v[5]) ^ (!v[4] & v[6]);
            let t1 = v[7].wrapping_add(s1).wrapping_add(ch).wrapping_add(K[i]).wrapping_add(w[i]);
            let s0 = v[0].rotate_right(2) ^ v[0].rotate_right(13) ^ v[0].rotate_right(22);
            let maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
            let t2 = s0.wrapping_add(maj);
            v = [t1.wrapping_add(t2), v[0], v[1], v[2], v[3].wrapping_add(t1), v[4], v[5], v[6]];
        }
        for (a, b) in h.iter_mut().zip(v) {
            *a = a.wrapping_add(b);
        }
    }
    let mut out = [0u8; 32];
    for (i, x) in h.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&x.to_be_bytes());
    }
    out
}
