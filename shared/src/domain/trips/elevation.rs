//! Elevation gain from GPS altitude, which is noisy (several meters, wandering over minutes):
//! summed raw, a flat city day climbs thousands of meters. The altitude is first smoothed (the
//! same Rauch–Tung–Striebel smoother as positions, in one dimension, trusting each fix by its
//! `vertical_accuracy`, default [`DEFAULT_VERTICAL_ACCURACY_M`]), then climbs are counted with
//! hysteresis: a rise counts once the smoothed altitude is a threshold above the lowest point
//! since the last descent, and a descent starts once it falls that much below the highest. The
//! threshold is 2.5 times the fixes' median vertical accuracy (without any, 3 times the
//! altitudes' scatter around their smoothed profile), between [`MIN_HYSTERESIS_M`] and
//! [`MAX_HYSTERESIS_M`]: GPS altitude wanders slowly by about its accuracy, which no smoothing
//! tells from a gentle hill.
//! A stop climbs nothing: its fixes count as one, at their median altitude, so an hour on a desk
//! adds no wander. A trip whose fixes carry no altitude has no elevation gain (null), not zero.

use super::fix::TripFix;
use super::smooth::rts;
use super::stops::Activity;
use crate::stats::median;

/// Altitude accuracy (meters, 1 sigma) assumed when a fix reports none.
pub const DEFAULT_VERTICAL_ACCURACY_M: f64 = 10.0;
/// Altitude accuracies are never taken as better than this (meters).
pub const MIN_VERTICAL_ACCURACY_M: f64 = 2.0;
/// Smallest climb or descent (meters, on the smoothed profile) that counts.
pub const MIN_HYSTERESIS_M: f64 = 5.0;
/// Climbs or descents this large always count.
pub const MAX_HYSTERESIS_M: f64 = 20.0;
/// The threshold in median vertical accuracies.
pub const HYSTERESIS_ACCURACIES: f64 = 2.5;
/// Without vertical accuracies: the threshold in standard deviations of the altitudes around
/// their smoothed profile.
pub const RESIDUAL_SIGMAS: f64 = 3.0;
/// How fast the smoothed climb rate may change (spectral density, m²/s³): a road or a trail
/// changes gradient over tens of seconds, GPS noise within seconds.
pub const VERTICAL_NOISE: f64 = 0.02;
/// Moving fixes are averaged over bins this long (seconds) before smoothing.
pub const BIN_SECONDS: i64 = 15;

/// Meters climbed at each fix (the climb counted there) and in all; `None` without altitudes.
pub fn gains(fixes: &[&TripFix], activity: &[Activity]) -> (Vec<f64>, Option<f64>) {
    let mut out = vec![0.0; fixes.len()];
    let has = |i: usize| fixes[i].altitude.is_some_and(f64::is_finite);
    // Samples: moving fixes by bins, each stop as one (its last fix, median altitude).
    let mut with: Vec<usize> = Vec::new();
    let mut z: Vec<f64> = Vec::new();
    let mut i = 0;
    while i < fixes.len() {
        let mut j = i;
        if activity[i] == Activity::Stop {
            while j + 1 < fixes.len() && activity[j + 1] == Activity::Stop {
                j += 1;
            }
            let mut alts: Vec<f64> = (i..=j).filter(|&k| has(k)).filter_map(|k| fixes[k].altitude).collect();
            if let Some(m) = median(&mut alts) {
                with.push(j);
                z.push(m);
            }
        } else {
            // Moving fixes in bins of BIN_SECONDS (their mean altitude, at the bin's last fix):
            // GPS altitude error is correlated over minutes, so ten fixes a second apart are
            // not ten times the evidence, and the result must not depend on the sampling rate.
            let start = fixes[i].recorded_at.0;
            while j + 1 < fixes.len()
                && activity[j + 1] == Activity::Moving
                && (fixes[j + 1].recorded_at.0 - start).num_seconds() < BIN_SECONDS
            {
                j += 1;
            }
            let alts: Vec<f64> = (i..=j).filter(|&k| has(k)).filter_map(|k| fixes[k].altitude).collect();
            if !alts.is_empty() {
                with.push(j);
                z.push(alts.iter().sum::<f64>() / alts.len() as f64);
            }
        }
        i = j + 1;
    }
    if with.is_empty() {
        return (out, None);
    }
    let t0 = fixes[with[0]].recorded_at.0;
    let t: Vec<f64> = with.iter().map(|&i| (fixes[i].recorded_at.0 - t0).num_milliseconds() as f64 / 1000.0).collect();
    let r: Vec<f64> = with
        .iter()
        .map(|&i| fixes[i].vertical_accuracy.unwrap_or(DEFAULT_VERTICAL_ACCURACY_M).max(MIN_VERTICAL_ACCURACY_M))
        .collect();
    let smooth = if z.len() >= 3 { rts(&t, &z, &r, VERTICAL_NOISE) } else { z.clone() };
    let mut reported: Vec<f64> = with.iter().filter_map(|&i| fixes[i].vertical_accuracy).collect();
    let noise = match median(&mut reported) {
        Some(m) => HYSTERESIS_ACCURACIES * m,
        None => {
            // No accuracy sent: the scatter of the altitudes around their smoothed profile.
            let sq: f64 = z.iter().zip(&smooth).map(|(a, b)| (a - b).powi(2)).sum();
            RESIDUAL_SIGMAS * (sq / z.len() as f64).sqrt()
        }
    };
    let threshold = noise.clamp(MIN_HYSTERESIS_M, MAX_HYSTERESIS_M);
    let (mut low, mut high, mut climbing) = (smooth[0], smooth[0], false);
    let mut total = 0.0;
    for (k, &h) in smooth.iter().enumerate() {
        if climbing {
            if h > high {
                out[with[k]] = h - high;
                total += h - high;
                high = h;
            } else if high - h >= threshold {
                climbing = false;
                low = h;
            }
        } else if h < low {
            low = h;
        } else if h - low >= threshold {
            climbing = true;
            out[with[k]] = h - low;
            total += h - low;
            high = h;
        }
    }
    (out, Some(total))
}
