//! Realistic GPS traces with their ground truth. A *timeline* says where the device truly is
//! every second (driving or walking along street geometry, standing still, in a tunnel, paused);
//! sampling it every 1, 5, 15 or 60 s adds what phones add:
//! - correlated position error (first-order Gauss–Markov per axis, τ = 60 s), σ 3–15 m while
//!   moving and 13–33 m for a phone lying still (reported accuracy 20–50 m), plus 1 m white noise;
//! - multipath outliers: 1 % of fixes thrown 150–600 m off, reporting an honest accuracy (their
//!   error), an optimistic one (5 m) or none;
//! - altitude error (Gauss–Markov, σ 5 m, τ 120 s, plus 1.5 m white noise).
//!
//! Reported accuracy is 1.5 σ (a 68 % radius, as phones report). Everything is seeded, so a
//! failure reproduces.

use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};

use crate::trace::{Rng, geodesic, offset};

/// Where the device truly is during one second.
#[derive(Debug, Clone)]
pub struct State {
    pub pos: (f64, f64),
    pub alt: f64,
    /// Per-axis σ (meters) of the position error now.
    pub sigma: f64,
    pub still: bool,
    /// No fix is recorded (tunnel, phone off).
    pub gap: bool,
}

pub struct Timeline {
    pub t0: DateTime<Utc>,
    pub states: Vec<State>,
    pub origin: (f64, f64),
}

/// `origin` moved by (x, y) meters east and north.
pub fn at(origin: (f64, f64), x: f64, y: f64) -> (f64, f64) {
    offset(origin.0, origin.1, x, y)
}

impl Timeline {
    pub fn new(t0: DateTime<Utc>, origin: (f64, f64), alt: f64) -> Self {
        let first = State { pos: origin, alt, sigma: 5.0, still: true, gap: false };
        Self { t0, states: vec![first], origin }
    }

    fn last(&self) -> State {
        self.states.last().cloned().expect("a timeline starts with a state")
    }

    /// Move through `path` (points in meters from the origin) at `speed` m/s, slowing to a
    /// third at each corner, climbing linearly to `alt_to`; position error σ `sigma`.
    pub fn travel(&mut self, path: &[(f64, f64)], speed: f64, alt_to: f64, sigma: f64, gap: bool) {
        let start = self.last();
        let pts: Vec<(f64, f64)> =
            std::iter::once(start.pos).chain(path.iter().map(|&(x, y)| at(self.origin, x, y))).collect();
        let legs: Vec<f64> = pts.windows(2).map(|w| geodesic(w[0], w[1])).collect();
        let total: f64 = legs.iter().sum();
        let (mut leg, mut along, mut done) = (0, 0.0, 0.0);
        while leg < legs.len() {
            // Vehicles slow down within 15 m of a corner; walkers keep their pace.
            let near_corner = leg + 1 < legs.len() && legs[leg] - along < 15.0 || leg > 0 && along < 15.0;
            let step = if near_corner && speed > 3.0 { speed / 3.0 } else { speed };
            along += step;
            done += step;
            while leg < legs.len() && along >= legs[leg] {
                along -= legs[leg];
                leg += 1;
            }
            let pos = if leg < legs.len() {
                let f = along / legs[leg];
                let (a, b) = (pts[leg], pts[leg + 1]);
                (a.0 + (b.0 - a.0) * f, a.1 + (b.1 - a.1) * f)
            } else {
                *pts.last().unwrap()
            };
            let alt = start.alt + (alt_to - start.alt) * (done / total).min(1.0);
            self.states.push(State { pos, alt, sigma, still: false, gap });
        }
    }

    /// Stay still for `seconds`, the phone reporting `accuracy` meters (σ = accuracy / 1.5).
    pub fn stay(&mut self, seconds: i64, accuracy: f64) {
        let s = self.last();
        for _ in 0..seconds {
            self.states.push(State { sigma: accuracy / 1.5, still: true, gap: false, ..s.clone() });
        }
    }

    /// Jump to `to` (meters from the origin) in one second: a position no vehicle reaches.
    pub fn teleport(&mut self, to: (f64, f64)) {
        let s = self.last();
        self.states.push(State { pos: at(self.origin, to.0, to.1), ..s });
    }

    pub fn time(&self, second: usize) -> DateTime<Utc> {
        self.t0 + Duration::seconds(second as i64)
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outliers {
    None,
    /// Accuracy reported as the real error.
    Honest,
    /// Accuracy reported as 5 m.
    Optimistic,
    /// No accuracy reported.
    Missing,
}

/// A fix as sent, and the truth at its time.
pub struct Sample {
    pub second: usize,
    pub json: Value,
    pub truth: (f64, f64),
    pub outlier: bool,
}

/// Gauss–Markov error along one axis, advanced a second at a time.
struct Markov {
    x: f64,
    tau: f64,
}

impl Markov {
    fn step(&mut self, rng: &mut Rng, sigma: f64) -> f64 {
        let a = (-1.0 / self.tau).exp();
        self.x = self.x * a + sigma * (1.0 - a * a).sqrt() * rng.normal();
        self.x
    }
}

/// Sample the timeline every `every` seconds.
pub fn sample(tl: &Timeline, every: usize, outliers: Outliers, seed: u64) -> Vec<Sample> {
    let mut rng = Rng::new(seed);
    let (mut ex, mut ey) = (Markov { x: 0.0, tau: 60.0 }, Markov { x: 0.0, tau: 60.0 });
    let mut ez = Markov { x: 0.0, tau: 120.0 };
    let mut out = Vec::new();
    let mut n = 0usize;
    for (k, s) in tl.states.iter().enumerate() {
        // The error evolves every second whether or not a fix is taken.
        let (dx, dy) = (ex.step(&mut rng, s.sigma), ey.step(&mut rng, s.sigma));
        let dz = ez.step(&mut rng, 5.0);
        let (wx, wy, wz) = (rng.normal(), rng.normal(), rng.normal() * 1.5);
        let roll = rng.uniform();
        let (dir, far) = (rng.uniform() * std::f64::consts::TAU, 150.0 + rng.uniform() * 450.0);
        if k % every != 0 || s.gap {
            continue;
        }
        n += 1;
        let outlier = outliers != Outliers::None && roll < 0.01 && n > 3;
        let (pos, accuracy) = if outlier {
            let p = offset(s.pos.0, s.pos.1, far * dir.cos(), far * dir.sin());
            let acc = match outliers {
                Outliers::Honest => Some(far.round()),
                Outliers::Optimistic => Some(5.0),
                _ => None,
            };
            (p, acc)
        } else {
            (offset(s.pos.0, s.pos.1, dx + wx, dy + wy), Some((1.5 * s.sigma).round().max(3.0)))
        };
        let mut json = json!({
            "coordinates": [pos.0, pos.1],
            "recorded_at": tl.time(k).format("%Y-%m-%dT%H:%M:%S%.3f").to_string(),
            "altitude": ((s.alt + dz + wz) * 10.0).round() / 10.0,
            "vertical_accuracy": 7.5,
        });
        if let Some(a) = accuracy {
            json["accuracy"] = a.into();
        }
        out.push(Sample { second: k, json, truth: s.pos, outlier });
    }
    out
}

/// Geodesic length through the true positions of `samples` (in order).
pub fn sampled_length(samples: &[&Sample]) -> f64 {
    samples.windows(2).map(|w| geodesic(w[0].truth, w[1].truth)).sum()
}

/// Meters truly climbed over seconds `[from, to]`.
pub fn true_climb(tl: &Timeline, from: usize, to: usize) -> f64 {
    tl.states[from..=to].windows(2).map(|w| (w[1].alt - w[0].alt).max(0.0)).sum()
}

/// True stops (still for at least `min_s` seconds) over `[from, to]`: (first, last second, place).
pub fn true_stops(tl: &Timeline, from: usize, to: usize, min_s: usize) -> Vec<(usize, usize, (f64, f64))> {
    let mut out = Vec::new();
    let mut k = from;
    while k <= to {
        if tl.states[k].still {
            let s = k;
            while k < to && tl.states[k + 1].still {
                k += 1;
            }
            if k - s >= min_s {
                out.push((s, k, tl.states[s].pos));
            }
        }
        k += 1;
    }
    out
}

/// A city drive: streets meeting at right angles and at a slant, one long curve (meters from the
/// origin; the route starts where the timeline is).
pub fn city_route(scale: f64) -> Vec<(f64, f64)> {
    let mut p = vec![(600.0, 0.0), (600.0, 450.0), (1100.0, 450.0), (1500.0, 850.0), (1500.0, 1400.0)];
    // A quarter circle of 400 m radius around (1100, 1400).
    for k in 1..=12 {
        let a = std::f64::consts::FRAC_PI_2 * f64::from(k) / 12.0;
        p.push((1100.0 + 400.0 * a.cos(), 1400.0 + 400.0 * a.sin()));
    }
    p.extend([(700.0, 1800.0), (700.0, 2400.0), (1600.0, 2400.0), (1600.0, 3000.0)]);
    p.into_iter().map(|(x, y)| (x * scale, y * scale)).collect()
}

/// A walk through a neighbourhood: short blocks, many corners.
pub fn walking_route(from: (f64, f64)) -> Vec<(f64, f64)> {
    let (x, y) = from;
    vec![
        (x + 120.0, y),
        (x + 120.0, y + 80.0),
        (x + 260.0, y + 80.0),
        (x + 300.0, y + 160.0),
        (x + 300.0, y + 320.0),
        (x + 180.0, y + 380.0),
        (x + 180.0, y + 520.0),
        (x + 420.0, y + 520.0),
        (x + 420.0, y + 700.0),
        (x + 600.0, y + 760.0),
        (x + 640.0, y + 980.0),
        (x + 900.0, y + 980.0),
    ]
}
