//! What the chords of sparse fixes miss of a road's bends between them. The curve through the
//! fixes ([`super::length`]) recovers a bend the fixes resolve (a circle through them); at 10 s
//! and sparser a car passes bends shorter than a step, and the heading change between steps
//! says how much they took.
//!
//! Model: the road's heading wanders as a random walk along it (on the real traces of
//! ../shared/data/trip-truth, consecutive turns between chords correlate by 0.0–0.35, near the
//! 1/4 a random walk gives, far from the 1 of resolved curves). Then a chord of an arc ℓ is on
//! average ℓ (1 − Δψ² / 8), with Δψ the turn between consecutive chords; a circle through the
//! fixes (what the curve gives) already recovers Δψ² / 24 of it, which leaves Δψ² / 12.

use super::gps::{self, SHAPE_FREE_STEP_M};
use crate::geometry::LngLat;

/// Meters per degree of latitude (mean Earth radius), for the flat frame at a step's start.
const M_PER_DEG: f64 = 6_371_008.8 * std::f64::consts::PI / 180.0;

/// Largest turn (radians) that counts: a sharper one is a corner the curve mostly follows, or
/// noise at a halt, and squared it would say more than a chord can miss.
const MAX_TURN_RAD: f64 = 1.0;

/// Factor (at least 1) by which the step b→c, after `a` and before `d`, is longer
/// than its curve: the unresolved share of the turns at b and c, less what the fixes' noise
/// (per-axis variance `v`, m²) makes of a turn. Steps up to [`SHAPE_FREE_STEP_M`] follow the
/// road's bends (1); it grows to the full share at twice that.
pub(super) fn unresolved(a: Option<LngLat>, b: LngLat, c: LngLat, d: Option<LngLat>, v: f64) -> f64 {
    let kx = b.lat.to_radians().cos() * M_PER_DEG;
    let xy = |p: LngLat| (gps::wrap_deg(p.lng - b.lng) * kx, (p.lat - b.lat) * M_PER_DEG);
    let (a, b, c, d) = (a.map(xy), xy(b), xy(c), d.map(xy));
    let len = |u: (f64, f64), w: (f64, f64)| (w.0 - u.0).hypot(w.1 - u.1);
    let step = len(b, c);
    let weight = ((step - SHAPE_FREE_STEP_M) / SHAPE_FREE_STEP_M).clamp(0.0, 1.0);
    if weight == 0.0 {
        return 1.0;
    }
    // Squared turn at q between p→q and q→r beyond its noise: v (1/d1² + 1/d2² + (1/d1 + 1/d2)²).
    let turn2 = |p: (f64, f64), q: (f64, f64), r: (f64, f64)| {
        let (d1, d2) = (len(p, q), len(q, r));
        if d1 == 0.0 || d2 == 0.0 {
            return None;
        }
        let cross = (q.0 - p.0) * (r.1 - q.1) - (q.1 - p.1) * (r.0 - q.0);
        let dot = (q.0 - p.0) * (r.0 - q.0) + (q.1 - p.1) * (r.1 - q.1);
        let t = cross.atan2(dot).abs().min(MAX_TURN_RAD);
        let noise = v * (1.0 / (d1 * d1) + 1.0 / (d2 * d2) + (1.0 / d1 + 1.0 / d2).powi(2));
        Some((t * t - noise).max(0.0))
    };
    let turns: Vec<f64> =
        [a.and_then(|a| turn2(a, b, c)), d.and_then(|d| turn2(b, c, d))].into_iter().flatten().collect();
    if turns.is_empty() {
        return 1.0;
    }
    1.0 + weight * turns.iter().sum::<f64>() / turns.len() as f64 / 12.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A point `x` meters east and `y` north of a place in Berlin.
    fn at(x: f64, y: f64) -> LngLat {
        LngLat { lng: 13.0 + x / (M_PER_DEG * 52f64.to_radians().cos()), lat: 52.0 + y / M_PER_DEG }
    }

    #[test]
    fn short_or_straight_steps_are_not_lengthened_and_turning_long_ones_are() {
        let straight = unresolved(Some(at(-180.0, 0.0)), at(0.0, 0.0), at(180.0, 0.0), Some(at(360.0, 0.0)), 4.0);
        assert!((straight - 1.0).abs() < 1e-9, "{straight}");
        // 30 m steps (1 Hz to 3 s) turning by 0.3 rad: what the curve follows.
        let (cos, sin) = (0.3f64.cos(), 0.3f64.sin());
        let short =
            unresolved(Some(at(-30.0, 0.0)), at(0.0, 0.0), at(30.0, 0.0), Some(at(30.0 + 30.0 * cos, 30.0 * sin)), 4.0);
        assert_eq!(short, 1.0);
        // 180 m steps turning by 0.3 rad at c: 0.09 / 12 / 2 (one turn of two), less noise.
        let f = unresolved(
            Some(at(-180.0, 0.0)),
            at(0.0, 0.0),
            at(180.0, 0.0),
            Some(at(180.0 + 180.0 * cos, 180.0 * sin)),
            4.0,
        );
        assert!((f - 1.0 - 0.09 / 24.0).abs() < 2e-4, "{f}");
    }
}
