//! Synthetic GPS traces: a route driven at a steady speed with Gaussian jitter, stops with
//! wandering and a few wild poor-accuracy fixes. Deterministic (seeded), so failures reproduce.

use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};

/// Meters per degree of latitude (close enough for offsets of a few meters).
const M_PER_DEG: f64 = 111_320.0;

/// xorshift64*: a tiny deterministic generator for test noise.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }
    pub fn uniform(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let (u1, u2) = (self.uniform().max(1e-12), self.uniform());
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

#[derive(Debug, Clone)]
pub struct Fix {
    pub lng: f64,
    pub lat: f64,
    pub at: DateTime<Utc>,
    pub accuracy: f64,
    pub altitude: f64,
}

impl Fix {
    pub fn json(&self) -> Value {
        json!({
            "coordinates": [self.lng, self.lat],
            "recorded_at": self.at.format("%Y-%m-%dT%H:%M:%S%.3f").to_string(),
            "accuracy": self.accuracy,
            "altitude": self.altitude,
        })
    }
}

/// Move `(lng, lat)` by `dx` east and `dy` north meters.
pub fn offset(lng: f64, lat: f64, dx: f64, dy: f64) -> (f64, f64) {
    (lng + dx / (M_PER_DEG * lat.to_radians().cos()), lat + dy / M_PER_DEG)
}

pub struct Trace {
    pub fixes: Vec<Fix>,
    pub now: DateTime<Utc>,
    rng: Rng,
    pub jitter_m: f64,
}

impl Trace {
    pub fn new(seed: u64, start: DateTime<Utc>, jitter_m: f64) -> Self {
        Self { fixes: Vec::new(), now: start, rng: Rng::new(seed), jitter_m }
    }

    fn push(&mut self, lng: f64, lat: f64, jitter: f64, accuracy: f64, altitude: f64) {
        let (lng, lat) = offset(lng, lat, self.rng.normal() * jitter, self.rng.normal() * jitter);
        self.fixes.push(Fix { lng, lat, at: self.now, accuracy, altitude });
    }

    /// Drive from `a` to `b` (lng, lat) at `speed` m/s with a fix every `every` seconds; the
    /// first fix is one step after `a` (so legs chain without duplicates).
    pub fn drive(&mut self, a: (f64, f64), b: (f64, f64), speed: f64, every: i64, alt: (f64, f64)) {
        let len = crate::trace::geodesic(a, b);
        let steps = (len / (speed * every as f64)).ceil().max(1.0) as usize;
        for i in 1..=steps {
            let f = i as f64 / steps as f64;
            self.now += Duration::seconds(every);
            let j = self.jitter_m;
            self.push(a.0 + (b.0 - a.0) * f, a.1 + (b.1 - a.1) * f, j, 5.0, alt.0 + (alt.1 - alt.0) * f);
        }
    }

    /// Stay at `at` for `seconds`, a fix every `every` s wandering by `wander_m`; `wild` of them
    /// are poor-accuracy fixes thrown 100-300 m away.
    pub fn stay(&mut self, at: (f64, f64), seconds: i64, every: i64, wander_m: f64, wild: usize, alt: f64) {
        let n = (seconds / every).max(1) as usize;
        let wild_every = if wild > 0 { n / (wild + 1) } else { usize::MAX };
        for i in 1..=n {
            self.now += Duration::seconds(every);
            if wild > 0 && i % wild_every == 0 && i / wild_every <= wild {
                let (dx, dy) = (100.0 + self.rng.uniform() * 200.0, 100.0 + self.rng.uniform() * 200.0);
                let (lng, lat) = offset(at.0, at.1, dx, -dy);
                self.fixes.push(Fix { lng, lat, at: self.now, accuracy: 150.0, altitude: alt });
            } else {
                self.push(at.0, at.1, wander_m, 12.0, alt);
            }
        }
    }
}

/// Geodesic length (meters) between two `(lng, lat)`, by the same WGS 84 geodesic `geo` computes.
pub fn geodesic(a: (f64, f64), b: (f64, f64)) -> f64 {
    use shared::geometry::LngLat;
    LngLat { lng: a.0, lat: a.1 }.distance_m(LngLat { lng: b.0, lat: b.1 })
}

#[test]
fn rng_is_deterministic_and_roughly_normal() {
    let mut r = Rng::new(7);
    let xs: Vec<f64> = (0..20_000).map(|_| r.normal()).collect();
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64;
    assert!(mean.abs() < 0.03 && (var - 1.0).abs() < 0.05, "{mean} {var}");
    assert_eq!(Rng::new(7).uniform(), Rng::new(7).uniform());
}
