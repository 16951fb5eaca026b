//! Elevation gain from GPS altitude, which is noisy (several meters, wandering over minutes):
//! summed raw, a flat city day climbs thousands of meters. The altitude is first smoothed (the
//! same Rauch–Tung–Striebel smoother as positions, in one dimension, trusting each fix by its
//! `vertical_accuracy`, default [`DEFAULT_VERTICAL_ACCURACY_M`]), then climbs are counted with
//! hysteresis: a rise counts once the smoothed altitude is [`HYSTERESIS_M`] above the lowest
//! point since the last descent, and a descent starts once it falls that much below the highest.
//! A trip whose fixes carry no altitude has no elevation gain (null), not zero.

use super::route::rts;
use crate::domain::locations::Location;

/// Altitude accuracy (meters, 1 sigma) assumed when a fix reports none.
pub const DEFAULT_VERTICAL_ACCURACY_M: f64 = 10.0;
/// Altitude accuracies are never taken as better than this (meters).
pub const MIN_VERTICAL_ACCURACY_M: f64 = 2.0;
/// Climbs and descents smaller than this (meters, on the smoothed profile) are noise.
pub const HYSTERESIS_M: f64 = 8.0;
/// How fast the smoothed climb rate may change (spectral density, m²/s³): a road or a trail
/// changes gradient over tens of seconds, GPS noise within seconds.
pub const VERTICAL_NOISE: f64 = 0.0005;

/// Meters climbed at each fix (the climb counted there) and in all; `None` without altitudes.
pub fn gains(fixes: &[&Location]) -> (Vec<f64>, Option<f64>) {
    let mut out = vec![0.0; fixes.len()];
    let with: Vec<usize> = (0..fixes.len()).filter(|&i| fixes[i].altitude.is_some_and(f64::is_finite)).collect();
    if with.is_empty() {
        return (out, None);
    }
    let t0 = fixes[with[0]].recorded_at.0;
    let t: Vec<f64> = with.iter().map(|&i| (fixes[i].recorded_at.0 - t0).num_milliseconds() as f64 / 1000.0).collect();
    let z: Vec<f64> = with.iter().map(|&i| fixes[i].altitude.unwrap_or_default()).collect();
    let r: Vec<f64> = with
        .iter()
        .map(|&i| fixes[i].vertical_accuracy.unwrap_or(DEFAULT_VERTICAL_ACCURACY_M).max(MIN_VERTICAL_ACCURACY_M))
        .collect();
    let smooth = if z.len() >= 3 { rts(&t, &z, &r, VERTICAL_NOISE) } else { z };
    let (mut low, mut high, mut climbing) = (smooth[0], smooth[0], false);
    let mut total = 0.0;
    for (k, &h) in smooth.iter().enumerate() {
        if climbing {
            if h > high {
                out[with[k]] = h - high;
                total += h - high;
                high = h;
            } else if high - h >= HYSTERESIS_M {
                climbing = false;
                low = h;
            }
        } else if h < low {
            low = h;
        } else if h - low >= HYSTERESIS_M {
            climbing = true;
            out[with[k]] = h - low;
            total += h - low;
            high = h;
        }
    }
    (out, Some(total))
}
