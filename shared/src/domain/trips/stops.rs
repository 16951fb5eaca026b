//! Stops: where a trip's fixes stayed. A run of fixes that stays within a radius of its running
//! centroid for at least [`STOP_MIN_SECONDS`], most of whose fixes do not show the device going
//! anywhere, is a stop (see `route` for how it counts).

use super::fix::TripFix;
use super::gps;
use super::parallel::worth_two;
use crate::geometry::LngLat;

/// What a fix of a trip is doing: standing at a stop or moving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    Stop,
    Moving,
}

impl Activity {
    pub fn as_str(self) -> &'static str {
        match self {
            Activity::Stop => "STOP",
            Activity::Moving => "MOVING",
        }
    }
}

/// Smallest stop radius (meters).
pub const STOP_RADIUS_MIN_M: f64 = 10.0;
/// Largest stop radius (meters).
pub const STOP_RADIUS_MAX_M: f64 = 100.0;
/// A stop's radius in the mean accuracy of its fixes.
pub const STOP_RADIUS_SIGMAS: f64 = 2.0;
/// A stop lasts at least this long (seconds).
pub const STOP_MIN_SECONDS: i64 = 120;
/// Fixes may stray out of a stop's radius this long (seconds) and still belong to it.
pub const STRAY_SECONDS: i64 = 60;
/// Half the span (seconds) over which a fix is seen going somewhere or staying ([`StopScan`]).
const STILL_WINDOW_SECONDS: i64 = 15;

fn stop_radius(mean_sigma: f64) -> f64 {
    (STOP_RADIUS_SIGMAS * mean_sigma).clamp(STOP_RADIUS_MIN_M, STOP_RADIUS_MAX_M)
}

/// Runs of fixes that are stops: (first, last, centroid). A run grows while the next fix is
/// within the radius of its running centroid, skipping fixes that stray out for at most
/// STRAY_SECONDS (and less than three radii) when a later one comes back; then neighbouring
/// runs at the same place are merged.
pub(super) fn detect_stops(fixes: &[&TripFix], sigmas: &[f64]) -> Vec<(usize, usize, LngLat)> {
    // What the scans read, side by side: each fix is looked at many times (a minute of fixes
    // around each), and a whole record per look is a cache miss each.
    let scan = StopScan::new(
        fixes.iter().map(|l| l.coordinates).collect(),
        fixes.iter().map(|l| l.recorded_at.0.timestamp_millis()).collect(),
        sigmas.to_vec(),
    );
    let runs = scan.runs();
    let mut merged: Vec<(usize, usize, LngLat, f64)> = Vec::new();
    for run in runs {
        // One place: their centroids within a radius; or nothing recorded between them (no
        // moving fix) and within three radii, the reach of a stray (a phone lying still at
        // 50 m accuracy makes two minutes of fixes drift that far together).
        let same_place = |last: &(usize, usize, LngLat, f64)| {
            let (d, r) = (gps::near_m(last.2, run.2), last.3.max(run.3));
            d <= r || (run.0 == last.1 + 1 && d <= 3.0 * r)
        };
        if let Some(last) = merged.last_mut()
            && scan.secs(last.1, run.0) <= STRAY_SECONDS
            && same_place(last)
        {
            let (wa, wb) = ((last.1 - last.0 + 1) as f64, (run.1 - run.0 + 1) as f64);
            last.2 = LngLat {
                lng: (last.2.lng * wa + run.2.lng * wb) / (wa + wb),
                lat: (last.2.lat * wa + run.2.lat * wb) / (wa + wb),
            };
            last.1 = run.1;
            last.3 = last.3.max(run.3);
            continue;
        }
        merged.push(run);
    }
    merged.into_iter().map(|(a, b, c, _)| (a, b, c)).collect()
}

/// A run of stop fixes: first, last, centroid, radius.
type Run = (usize, usize, LngLat, f64);

/// The fixes as stop detection reads them.
struct StopScan {
    pos: Vec<LngLat>,
    ms: Vec<i64>,
    sigmas: Vec<f64>,
    going: Vec<bool>,
}

impl StopScan {
    /// The scan's columns, and which fixes show the device going somewhere: the fixes
    /// [`STILL_WINDOW_SECONDS`] before and after it lie further apart than twice their accuracy.
    /// A run mostly of those is no stop, however long it stays within its radius: someone
    /// pacing a path turns at its ends within a radius for minutes, while a phone lying still
    /// drifts far less in that time.
    fn new(pos: Vec<LngLat>, ms: Vec<i64>, sigmas: Vec<f64>) -> Self {
        let n = pos.len();
        let window = STILL_WINDOW_SECONDS * 1000;
        let (mut a, mut b) = (0, 0);
        let going = (0..n)
            .map(|k| {
                while ms[a] < ms[k] - window {
                    a += 1;
                }
                while b + 1 < n && ms[b + 1] <= ms[k] + window {
                    b += 1;
                }
                ms[b] - ms[a] >= window && gps::near_m(pos[a], pos[b]) > 2.0 * sigmas[a].max(sigmas[b])
            })
            .collect();
        Self { pos, ms, sigmas, going }
    }

    /// Whole seconds between fixes, cut toward zero as chrono's `num_seconds` cuts them.
    fn secs(&self, a: usize, b: usize) -> i64 {
        (self.ms[b] - self.ms[a]) / 1000
    }

    /// Every run, in order. Long traces are scanned in two halves at once: the run grown from
    /// a fix depends on that fix alone, so once the first half's scan reaches a fix the second
    /// half's scan started from, what follows is the second half's, as it would be.
    fn runs(&self) -> Vec<Run> {
        let n = self.pos.len();
        if !worth_two(n) {
            return self.scan(0, n, |_| false).0;
        }
        let mid = n / 2;
        std::thread::scope(|s| {
            let second = s.spawn(|| {
                let mut started = vec![false; n - mid];
                let (runs, _) = self.scan(mid, n, |i| {
                    started[i - mid] = true;
                    false
                });
                (runs, started)
            });
            let (first, _) = self.scan(0, mid, |_| false);
            let (second, started) = second.join().expect("stop detection's second half panicked");
            // Go on from where the first half stopped until a start the second half made too.
            let from = first.last().map_or(0, |r| r.1 + 1).max(mid);
            let mut runs = first;
            let (between, joined) = self.scan(from, n, |i| i >= mid && started[i - mid]);
            runs.extend(between);
            if let Some(at) = joined {
                runs.extend(second.into_iter().filter(|r| r.0 >= at));
            }
            runs
        })
    }

    /// The runs started from `from` on, each start told to `stop_at` first: scanning ends at
    /// the first start it answers true for (returned), or at `to`.
    fn scan(&self, from: usize, to: usize, mut stop_at: impl FnMut(usize) -> bool) -> (Vec<Run>, Option<usize>) {
        let (pos, sigmas, n) = (&self.pos, &self.sigmas, self.pos.len());
        let mut runs: Vec<Run> = Vec::new();
        let mut i = from;
        while i < to {
            if stop_at(i) {
                return (runs, Some(i));
            }
            let (mut sum_lng, mut sum_lat, mut sum_sigma, mut count) = (pos[i].lng, pos[i].lat, sigmas[i], 1.0);
            // Fixes of the run that show the device going somewhere (see `StopScan::new`).
            let mut going = usize::from(self.going[i]);
            let mut j = i;
            let near = gps::NearScan::new(pos[i].lat);
            loop {
                let c = LngLat { lng: sum_lng / count, lat: sum_lat / count };
                let r = stop_radius(sum_sigma / count);
                let mut k = j + 1;
                let mut found = None;
                while k < n {
                    match near.ring(c, pos[k], r) {
                        gps::Ring::Within => {
                            found = Some(k);
                            break;
                        }
                        gps::Ring::Beyond => break,
                        gps::Ring::Between if self.secs(j, k) > STRAY_SECONDS => break,
                        gps::Ring::Between => {}
                    }
                    k += 1;
                }
                let Some(k) = found else { break };
                going += usize::from(self.going[k]);
                j = k;
                sum_lng += pos[k].lng;
                sum_lat += pos[k].lat;
                sum_sigma += sigmas[k];
                count += 1.0;
            }
            if j > i && self.secs(i, j) >= STOP_MIN_SECONDS && 2 * going < count as usize {
                let c = LngLat { lng: sum_lng / count, lat: sum_lat / count };
                runs.push((i, j, c, stop_radius(sum_sigma / count)));
                i = j + 1;
            } else {
                i += 1;
            }
        }
        (runs, None)
    }
}

#[cfg(test)]
mod tests {
    use super::super::parallel::one_pass;
    use super::*;

    #[test]
    fn stops_found_in_two_halves_are_those_found_in_one_scan() {
        // A day of 1 s fixes: drives, walks, crawls and stops of many lengths, 5-50 m noise from
        // a fixed-seed generator; the seeds put a long stop across the middle or not.
        for seed in [1u64, 7, 42] {
            let mut state = seed;
            let mut rand = move || {
                state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                (state >> 11) as f64 / (1u64 << 53) as f64
            };
            let (mut x, mut y) = (0.0f64, 0.0f64);
            let (mut pos, mut ms, mut sigmas) = (Vec::new(), Vec::new(), Vec::new());
            while pos.len() < 60_000 {
                let len = 20 + (rand() * 600.0) as usize;
                let speed = [0.0, 0.0, 0.6, 1.4, 4.0, 12.0][(rand() * 6.0) as usize];
                let noise = 5.0 + rand() * 45.0;
                let heading = rand() * std::f64::consts::TAU;
                for _ in 0..len {
                    x += speed * heading.cos();
                    y += speed * heading.sin();
                    let (ex, ey) = ((rand() - 0.5) * 2.0 * noise, (rand() - 0.5) * 2.0 * noise);
                    pos.push(LngLat { lng: 13.4 + (x + ex) / 68_000.0, lat: 52.5 + (y + ey) / 111_000.0 });
                    ms.push(pos.len() as i64 * 1000);
                    sigmas.push(noise);
                }
            }
            let scan = StopScan::new(pos, ms, sigmas);
            let one = one_pass(|| scan.runs());
            assert!(one.len() > 20, "seed {seed}: {} runs", one.len());
            let two = scan.runs();
            assert!(one == two, "seed {seed}: two halves found other runs");
        }
    }
}
