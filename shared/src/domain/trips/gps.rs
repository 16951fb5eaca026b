//! Which fixes to believe. Phones report positions far off the path (multipath, a fall-back to
//! cell towers) with good, poor or no accuracy; followed out and back, one such fix adds twice
//! its error to a trip's distance and can fire a waypoint event. A fix is implausible when its
//! accuracy is worse than [`MAX_ACCURACY_M`] or its accepted neighbours contradict it; its own
//! accuracy buys it no leniency (an optimistic accuracy is what an outlier reports). Offline
//! ([`judge`]) the worst offender goes first, so an outlier never condemns its neighbours; online
//! a fix that jumps is held until its successor shows whether the path went there.
//! See docs/trips.md, "Distance, duration, route", step 1, and "which fixes".

use serde::{Deserialize, Serialize};

use crate::domain::locations::Location;
use crate::geometry::LngLat;
use crate::time::Timestamp;

/// Fixes less accurate than this (meters) are never used.
pub const MAX_ACCURACY_M: f64 = 100.0;
/// Accuracy (meters) assumed when a fix reports none: a mediocre fix, never a precise one.
pub const MISSING_ACCURACY_M: f64 = 25.0;
/// Fixes never count as more accurate than this (meters).
pub const MIN_ACCURACY_M: f64 = 3.0;
/// No trip moves faster than this (m/s, about 250 km/h).
pub const MAX_SPEED_MPS: f64 = 70.0;
/// Width of the plausibility gate in the neighbours' accuracies.
pub const GATE_SIGMAS: f64 = 3.0;
/// Slack (meters) always allowed on top of movement and accuracy.
pub const GATE_FLOOR_M: f64 = 10.0;
/// Reaching a fix and leaving it may each need this many times the speed seen around it.
pub const SPEED_SLACK: f64 = 1.5;
/// The speed seen around a fix is taken as at least this (m/s).
pub const MIN_LOCAL_SPEED_MPS: f64 = 1.0;

/// Why a fix was left out of a trip's figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exclusion {
    Accuracy,
    Outlier,
}

impl Exclusion {
    pub fn as_str(self) -> &'static str {
        match self {
            Exclusion::Accuracy => "accuracy",
            Exclusion::Outlier => "outlier",
        }
    }
}

/// What judging needs of a fix.
pub trait Positioned {
    fn position(&self) -> LngLat;
    fn at(&self) -> Timestamp;
    /// Reported horizontal accuracy (meters), if any.
    fn reported_accuracy(&self) -> Option<f64>;
}

impl Positioned for Location {
    fn position(&self) -> LngLat {
        self.coordinates
    }
    fn at(&self) -> Timestamp {
        self.recorded_at
    }
    fn reported_accuracy(&self) -> Option<f64> {
        self.horizontal_accuracy.or(self.accuracy)
    }
}

/// A fix as the online judge keeps it on the trip record (small: no metadata).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fix {
    pub id: String,
    pub coordinates: LngLat,
    pub recorded_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accuracy: Option<f64>,
}

impl From<&Location> for Fix {
    fn from(l: &Location) -> Self {
        Fix {
            id: l.id.clone(),
            coordinates: l.coordinates,
            recorded_at: l.recorded_at,
            accuracy: l.reported_accuracy(),
        }
    }
}

impl Positioned for Fix {
    fn position(&self) -> LngLat {
        self.coordinates
    }
    fn at(&self) -> Timestamp {
        self.recorded_at
    }
    fn reported_accuracy(&self) -> Option<f64> {
        self.accuracy
    }
}

/// The accuracy (meters, 1 sigma) a fix is taken to have.
pub fn sigma(l: &impl Positioned) -> f64 {
    l.reported_accuracy().unwrap_or(MISSING_ACCURACY_M).max(MIN_ACCURACY_M)
}

/// How far each fix lies off the line through its neighbours (meters): the fixes before and
/// after it at other positions (a logger resending its last fix says nothing new). `None` for
/// the ends, a fix repeating its predecessor, and neighbours at one place (no line to be off).
/// On a straight path that distance is the fixes' short-term noise; at a corner, the path's
/// shape.
pub fn offsets<P: Positioned>(fixes: &[&P]) -> Vec<Option<f64>> {
    let pos: Vec<LngLat> = fixes.iter().map(|l| l.position()).collect();
    let n = pos.len();
    // The nearest index before each fix at another position.
    let mut before = vec![None; n];
    for k in 1..n {
        before[k] = if pos[k - 1] != pos[k] { Some(k - 1) } else { before[k - 1] };
    }
    let mut after = vec![None; n];
    for k in (0..n.saturating_sub(1)).rev() {
        after[k] = if pos[k + 1] != pos[k] { Some(k + 1) } else { after[k + 1] };
    }
    (0..n)
        .map(|k| {
            let (a, b) = (pos[before[k]?], pos[after[k]?]);
            if k > 0 && pos[k - 1] == pos[k] {
                return None;
            }
            let near = NearScan::new(pos[k].lat);
            let (ax, ay) = (wrap_deg(pos[k].lng - a.lng) * near.cos0, pos[k].lat - a.lat);
            let (bx, by) = (wrap_deg(b.lng - a.lng) * near.cos0, b.lat - a.lat);
            let chord = bx.hypot(by);
            // The path's own curve lies off the chord by d1·d2 / 2R (its sagitta, radius R), noise
            // by the same at any spacing: beyond steps of [`SHAPE_FREE_STEP_M`] the offset is
            // mostly the road's shape, and is scaled down as such (at 15 s a car's offsets read
            // 10–60 m on rural roads, its fixes are good to 3).
            let (d1, d2) = (ax.hypot(ay) * M_PER_DEG, (bx - ax).hypot(by - ay) * M_PER_DEG);
            let shape = (SHAPE_FREE_STEP_M * SHAPE_FREE_STEP_M / (d1 * d2)).min(1.0);
            (chord * M_PER_DEG > 1e-3).then(|| shape * M_PER_DEG * (ax * by - ay * bx).abs() / chord)
        })
        .collect()
}

/// Steps (meters) up to which a fix's offset off its neighbours' line is its noise, not the
/// path's curve: a road bending at a radius of 500 m (most of a road outside its corners) lies
/// 2.5 m off the chord of two 50 m steps, what a GNSS fix's noise is.
pub const SHAPE_FREE_STEP_M: f64 = 50.0;

/// Lower quartile of |N(0, 1)|: an offset's lower quartile over this is its σ.
pub const OFFSET_QUARTILE: f64 = 0.3186;

/// The fixes' short-term noise (meters, 1 sigma, per axis) from their [`offsets`], or `None`
/// when fewer than a few tell. Most of a path is straight, but fixes 15 s apart put many of
/// them at a curve, so the lower quartile is taken (of |N(0, s²)|: 0.3186 s) rather than the
/// median.
pub fn residual_sigma(offsets: &[Option<f64>]) -> Option<f64> {
    /// Fewer offsets than this tell too little.
    const MIN_RESIDUALS: usize = 8;
    let mut across: Vec<f64> = offsets.iter().flatten().copied().collect();
    if across.len() < MIN_RESIDUALS {
        return None;
    }
    let k = across.len() / 4;
    Some(*across.select_nth_unstable_by(k, f64::total_cmp).1 / OFFSET_QUARTILE)
}

/// The accuracy (meters, 1 sigma) of fixes that report none, from [`residual_sigma`]: for white
/// noise of σ per axis a fix lies off its neighbours' line by N(0, 1.5 σ²). Units that send no
/// accuracy are mostly dedicated GNSS units (fleet trackers, bicycle computers, loggers) far
/// better than [`MISSING_ACCURACY_M`]: judged by that figure, their corners were smoothed away.
/// Between [`MIN_ACCURACY_M`] and [`MISSING_ACCURACY_M`], the latter when too few fixes tell.
pub fn missing_sigma(residual: Option<f64>) -> f64 {
    residual.map_or(MISSING_ACCURACY_M, |s| (s / 1.5f64.sqrt()).clamp(MIN_ACCURACY_M, MISSING_ACCURACY_M))
}

fn accuracy_ok(l: &impl Positioned) -> bool {
    l.reported_accuracy().is_none_or(|a| a <= MAX_ACCURACY_M)
}

fn secs(a: Timestamp, b: Timestamp) -> f64 {
    ((b.0 - a.0).num_milliseconds() as f64 / 1000.0).max(1e-3)
}

/// Meters between two nearby positions (equirectangular at their mean latitude): within 0.1 %
/// of the geodesic over a few kilometres, and without trigonometry but one cosine, which matters
/// when every fix of a 100,000-point trip is judged several times. [`NearScan::m`] with the
/// cosine at the pair's mean latitude.
pub fn near_m(a: LngLat, b: LngLat) -> f64 {
    NearScan::new((a.lat + b.lat) * 0.5).m(a, b)
}

/// Meters in a degree of latitude on the mean-radius sphere.
const M_PER_DEG: f64 = 6_371_008.8 * std::f64::consts::PI / 180.0;

/// Where a position lies from a centre, against a radius `r`: within it, beyond `3 r`, or
/// between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ring {
    Within,
    Between,
    Beyond,
}

/// [`near_m`] compared with a radius, for many comparisons around one place (stop detection
/// scans up to a minute of fixes around each fix): the cosine is taken once, at `lat0`, and
/// bounds the one [`near_m`] would take (|cos a − cos b| ≤ |a − b|); only when the bounds do not
/// settle the comparison is the distance computed. The answer is always the one [`near_m`] gives.
pub struct NearScan {
    lat0: f64,
    cos0: f64,
}

impl NearScan {
    pub fn new(lat0: f64) -> Self {
        Self { lat0, cos0: lat0.to_radians().cos() }
    }

    /// Meters between two positions near `lat0`, as [`near_m`] measures them but with the cosine
    /// taken at `lat0`: for the judge's several distances around one fix, one cosine instead of
    /// one each (trigonometry was most of its time). Off from [`near_m`] by the ratio of the two
    /// cosines: under 0.01 % for positions within 100 m of `lat0`, about 0.1 % a few kilometres
    /// away at mid latitudes; the judge's margins are tens of metres.
    pub fn m(&self, a: LngLat, b: LngLat) -> f64 {
        let x = wrap_deg(b.lng - a.lng) * self.cos0;
        let y = b.lat - a.lat;
        M_PER_DEG * (x * x + y * y).sqrt()
    }

    /// How `near_m(c, p)` compares with `r` (`Within`: at most `r`) and `3 r` (`Beyond`: more).
    pub fn ring(&self, c: LngLat, p: LngLat, r: f64) -> Ring {
        // Far wider than the rounding of either computation (a few units in the last place).
        const MARGIN: f64 = 1e-9;
        let dlng = wrap_deg(p.lng - c.lng).abs();
        let y2 = (p.lat - c.lat) * (p.lat - c.lat);
        let slack = ((c.lat + p.lat) * 0.5 - self.lat0).abs().to_radians();
        // Squares of the bounds (in degrees) against squares of the radii: no square roots.
        let lo = (dlng * (self.cos0 - slack).max(0.0)).powi(2) + y2;
        let hi = (dlng * (self.cos0 + slack)).powi(2) + y2;
        let sq = |m: f64| (m / M_PER_DEG).powi(2);
        if hi < sq(r * (1.0 - MARGIN)) {
            return Ring::Within;
        }
        if lo > sq(3.0 * r * (1.0 + MARGIN)) {
            return Ring::Beyond;
        }
        if lo > sq(r * (1.0 + MARGIN)) && hi < sq(3.0 * r * (1.0 - MARGIN)) {
            return Ring::Between;
        }
        let d = near_m(c, p);
        if d <= r {
            Ring::Within
        } else if d > 3.0 * r {
            Ring::Beyond
        } else {
            Ring::Between
        }
    }
}

/// [`NearScan::m`] along a trace, for distances between consecutive fixes: the cosine is taken
/// again only once the trace is more than 0.01° of latitude (about 1.1 km) from where it was
/// last taken, so a pass over 100,000 fixes takes a few hundred cosines rather than one a fix.
/// Off from [`near_m`] by at most tan(latitude) × 0.01° in radians: 0.02 % at 52°, 0.1 % at 80°,
/// for the speed tests it serves (jumps beyond [`MAX_SPEED_MPS`]).
#[derive(Default)]
pub struct Along(Option<NearScan>);

impl Along {
    const RENEW_DEG: f64 = 0.01;

    pub fn m(&mut self, a: LngLat, b: LngLat) -> f64 {
        if self.0.as_ref().is_some_and(|s| (a.lat - s.lat0).abs() > Self::RENEW_DEG) {
            self.0 = None;
        }
        self.0.get_or_insert_with(|| NearScan::new(a.lat)).m(a, b)
    }
}

/// `(d + 540) mod 360 − 180`: a longitude difference wrapped into [−180, 180), bit for bit as
/// `rem_euclid` gives it (each subtraction is exact), without a libm `fmod` per call.
pub fn wrap_deg(d: f64) -> f64 {
    let x = d + 540.0;
    let r = if (0.0..360.0).contains(&x) {
        x
    } else if (360.0..720.0).contains(&x) {
        x - 360.0
    } else if (720.0..1080.0).contains(&x) {
        x - 720.0
    } else {
        x.rem_euclid(360.0)
    };
    r - 180.0
}

/// `a` moved towards `b` by the fraction `f`, in the small-distance approximation.
fn lerp(a: LngLat, b: LngLat, f: f64) -> LngLat {
    let dlng = wrap_deg(b.lng - a.lng);
    LngLat { lng: a.lng + dlng * f, lat: a.lat + (b.lat - a.lat) * f }
}

/// How far (as a multiple of what is allowed) `i` strays given its accepted neighbours `a`
/// before and `n` after; `speed` is the local speed (m/s) seen around them. Above 1: implausible.
pub fn strain<P: Positioned>(a: &P, i: &P, n: &P, speed: f64) -> f64 {
    strain_around(&NearScan::new(i.position().lat), a, i, n, speed, false)
}

/// [`strain`] with its distances measured around `i` by `near`. `beside_end`: `a` or `n` is an
/// end, the speed around `i` shows on one side only, and `i` is judged by the speed reaching and
/// leaving it needs alone, not by how far off its neighbours' line that speed allows (a fleet
/// car's loop round a block right after its first fix, 30 s apart, was dropped).
fn strain_around<P: Positioned>(near: &NearScan, a: &P, i: &P, n: &P, speed: f64, beside_end: bool) -> f64 {
    let (dta, dtn) = (secs(a.at(), i.at()), secs(i.at(), n.at()));
    let expected = lerp(a.position(), n.position(), dta / (dta + dtn));
    let off = near.m(i.position(), expected);
    let chord = near.m(a.position(), n.position()) / (dta + dtn);
    if chord > MAX_SPEED_MPS {
        // The neighbours contradict each other: a jump of the whole trace, not an out-and-back
        // of this fix. The route is cut there instead (see `route`).
        return 0.0;
    }
    let v = speed.max(chord).min(MAX_SPEED_MPS);
    let slack = GATE_SIGMAS * sigma(a).hypot(sigma(n)) + GATE_FLOOR_M;
    let allowed = v * dta.min(dtn) + slack;
    let (da, dn) = (near.m(i.position(), a.position()), near.m(i.position(), n.position()));
    // Reaching the fix and leaving it both need much more than the speed seen around it: a
    // corner or a U-turn keeps the speed, a fix thrown sideways does not.
    let detour = ((da - slack) / dta).min((dn - slack) / dtn) / (SPEED_SLACK * v.max(MIN_LOCAL_SPEED_MPS));
    let too_fast = da / dta > MAX_SPEED_MPS && dn / dtn > MAX_SPEED_MPS;
    let s = if beside_end { detour } else { (off / allowed).max(detour) };
    if too_fast { s.max(1.0 + 1e-9) } else { s }
}

/// How far an end fix `e` strays from its only neighbour `n`: with one side only, a jump cannot
/// be told from a departure, so only the speed it needs is judged (beyond the accuracy slack).
fn end_strain<P: Positioned>(e: &P, n: &P) -> f64 {
    let dt = secs(e.at().min(n.at()), e.at().max(n.at()));
    let jump = near_m(e.position(), n.position()) - GATE_SIGMAS * sigma(n) - GATE_FLOOR_M;
    jump.max(0.0) / (MAX_SPEED_MPS * dt)
}

/// For fixes in time order: `None` for a fix to use, else why it is left out.
pub fn judge<P: Positioned + Sync>(fixes: &[&P]) -> Vec<Option<Exclusion>> {
    let n = fixes.len();
    let mut out: Vec<Option<Exclusion>> =
        fixes.iter().map(|l| (!accuracy_ok(*l)).then_some(Exclusion::Accuracy)).collect();
    // Doubly linked list over the fixes still accepted.
    let mut alive: Vec<usize> = (0..n).filter(|&i| out[i].is_none()).collect();
    let mut prev = vec![usize::MAX; n];
    let mut next = vec![usize::MAX; n];
    for w in alive.windows(2) {
        next[w[0]] = w[1];
        prev[w[1]] = w[0];
    }
    let speed = |near: &NearScan, a: usize, b: usize| -> f64 {
        if a == usize::MAX || b == usize::MAX {
            return 0.0;
        }
        near.m(fixes[a].position(), fixes[b].position()) / secs(fixes[a].at(), fixes[b].at())
    };
    let mut score = vec![0.0f64; n];
    // Each round scores every accepted fix against its current neighbours and removes the worst
    // of each neighbourhood; a few rounds settle it. A score depends on the two accepted fixes
    // on either side only, so after the first round only those around a removed fix are scored
    // again (the rest would come out the same).
    let mut rescore = alive.clone();
    for _ in 0..64 {
        let score_of = |i: usize| {
            let (a, b) = (prev[i], next[i]);
            match (a != usize::MAX, b != usize::MAX) {
                (true, true) => {
                    // One cosine for the six distances around `i`.
                    let near = NearScan::new(fixes[i].position().lat);
                    let local = speed(&near, prev[a], a).max(speed(&near, b, next[b]));
                    let beside_end = prev[a] == usize::MAX || next[b] == usize::MAX;
                    strain_around(&near, fixes[a], fixes[i], fixes[b], local, beside_end)
                }
                (false, true) => end_strain(fixes[i], fixes[b]),
                (true, false) => end_strain(fixes[i], fixes[a]),
                (false, false) => 0.0,
            }
        };
        // The first round scores every fix: in two halves at once when there are many.
        let scores = |r: std::ops::Range<usize>| rescore[r].iter().map(|&i| score_of(i)).collect::<Vec<f64>>();
        let parts = super::parallel::in_two(rescore.len(), rescore.len(), rescore.len() / 2, &scores);
        for (&i, s) in rescore.iter().zip(parts.into_iter().flatten()) {
            score[i] = s;
        }
        let mut worst = Vec::new();
        let mut i = alive.first().copied().unwrap_or(usize::MAX);
        while i != usize::MAX {
            let (a, b) = (prev[i], next[i]);
            if score[i] > 1.0 && (a == usize::MAX || score[i] >= score[a]) && (b == usize::MAX || score[i] > score[b]) {
                worst.push(i);
            }
            i = b;
        }
        if worst.is_empty() {
            break;
        }
        for &i in &worst {
            out[i] = Some(Exclusion::Outlier);
            let (a, b) = (prev[i], next[i]);
            if a != usize::MAX {
                next[a] = b;
            }
            if b != usize::MAX {
                prev[b] = a;
            }
        }
        alive.retain(|&i| out[i].is_none());
        rescore.clear();
        for &w in &worst {
            // The nearest accepted fixes before and after `w` (a removed neighbour is skipped),
            // and the next ones out.
            let (mut a, mut b) = (prev[w], next[w]);
            while a != usize::MAX && out[a].is_some() {
                a = prev[a];
            }
            while b != usize::MAX && out[b].is_some() {
                b = next[b];
            }
            for x in [a, b] {
                if x != usize::MAX {
                    rescore.push(x);
                }
            }
            for x in [(a != usize::MAX).then(|| prev[a]), (b != usize::MAX).then(|| next[b])].into_iter().flatten() {
                if x != usize::MAX {
                    rescore.push(x);
                }
            }
        }
        rescore.sort_unstable();
        rescore.dedup();
    }
    out
}

/// The online judge kept on a trip: the last accepted fix and one held back for its successor.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OnlineFilter {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last: Option<Fix>,
    /// Speed (m/s) between the last two accepted fixes (unknown before there are two).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    speed: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    held: Option<Fix>,
}

impl OnlineFilter {
    /// Whether nothing has been seen yet (so the record need not carry it).
    pub fn is_empty(&self) -> bool {
        self.last.is_none() && self.held.is_none()
    }

    /// Feed the next fix (in time order); returns the fixes now accepted, in order.
    pub fn push(&mut self, f: &Location) -> Vec<Fix> {
        if !accuracy_ok(f) {
            return Vec::new();
        }
        let f = Fix::from(f);
        let f = &f;
        let mut out = Vec::new();
        if let Some(h) = self.held.take() {
            let ok = match &self.last {
                Some(a) => strain(a, &h, f, self.speed.unwrap_or(0.0)) <= 1.0,
                None => end_strain(&h, f) <= 1.0,
            };
            if ok {
                self.accept(&h);
                out.push(h);
            }
        }
        if self.agrees(f) {
            self.accept(f);
            out.push(f.clone());
        } else {
            self.held = Some(f.clone());
        }
        out
    }

    /// When the newest fix seen (accepted or held) was recorded.
    pub fn newest_at(&self) -> Option<Timestamp> {
        [&self.last, &self.held].into_iter().flatten().map(|f| f.recorded_at).max()
    }

    /// The trip ends (or pauses): the held fix is judged on its predecessor alone.
    pub fn finish(&mut self) -> Option<Fix> {
        let h = self.held.take()?;
        let ok = self.last.as_ref().is_none_or(|a| end_strain(&h, a) <= 1.0);
        ok.then(|| {
            self.accept(&h);
            h
        })
    }

    /// Whether `f` continues from the last accepted fix as the recent movement allows.
    fn agrees(&self, f: &Fix) -> bool {
        let Some(a) = &self.last else { return false };
        if f.recorded_at <= a.recorded_at {
            return true;
        }
        let dt = secs(a.recorded_at, f.recorded_at);
        let jump = near_m(f.coordinates, a.coordinates);
        let v = self.speed.unwrap_or(MAX_SPEED_MPS).min(MAX_SPEED_MPS);
        jump <= v * dt * 1.5 + GATE_SIGMAS * sigma(a).hypot(MIN_ACCURACY_M) + GATE_FLOOR_M
    }

    fn accept(&mut self, f: &Fix) {
        if let Some(a) = &self.last
            && f.recorded_at > a.recorded_at
        {
            self.speed = Some(near_m(f.coordinates, a.coordinates) / secs(a.recorded_at, f.recorded_at));
        }
        self.last = Some(f.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fix(x_m: f64, y_m: f64, secs: i64, accuracy: Option<f64>) -> Location {
        let at = chrono::DateTime::from_timestamp(1_700_000_000 + secs, 0).unwrap_or_default();
        let mut v = serde_json::json!({
            "coordinates": [13.0 + x_m / 67_000.0, 52.0 + y_m / 111_320.0],
            "recorded_at": at.format("%Y-%m-%dT%H:%M:%S").to_string(),
        });
        if let Some(a) = accuracy {
            v["accuracy"] = a.into();
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_spike_is_an_outlier_whatever_accuracy_it_claims() {
        for claimed in [Some(5.0), None, Some(60.0)] {
            let mut fixes: Vec<Location> = (0..20).map(|i| fix(15.0 * i as f64, 0.0, i, Some(5.0))).collect();
            fixes[10] = fix(150.0, 300.0, 10, claimed);
            let refs: Vec<&Location> = fixes.iter().collect();
            let j = judge(&refs);
            assert_eq!(j[10], Some(Exclusion::Outlier), "claimed {claimed:?}");
            assert_eq!(j.iter().filter(|x| x.is_some()).count(), 1, "only the spike: {j:?}");
        }
    }

    #[test]
    fn wrapping_is_rem_euclid_bit_for_bit() {
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        for k in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let d = match k % 4 {
                0 => (x >> 11) as f64 / (1u64 << 53) as f64 * 720.0 - 360.0,
                1 => ((x >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 1e-3,
                2 => [180.0, -180.0, 360.0, -360.0, 0.0, 539.0][(x % 6) as usize],
                _ => ((x >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 1e4,
            };
            let want = (d + 540.0).rem_euclid(360.0) - 180.0;
            assert_eq!(wrap_deg(d).to_bits(), want.to_bits(), "{d}");
        }
    }

    #[test]
    fn the_ring_is_what_the_distance_says() {
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        let mut u = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut settled = 0;
        for _ in 0..200_000 {
            let lat0 = u() * 170.0 - 85.0;
            let start = LngLat { lng: u() * 359.0 - 179.5, lat: lat0 };
            // A centre and a fix within a few hundred meters of the start, the fix often right
            // at r or 3 r from the centre.
            let c = LngLat { lng: start.lng + (u() - 0.5) * 2e-3, lat: start.lat + (u() - 0.5) * 2e-3 };
            let r = 25.0 + u() * 75.0;
            let p0 = LngLat { lng: c.lng + (u() - 0.5) * 4e-3, lat: c.lat + (u() - 0.5) * 4e-3 };
            let d0 = near_m(c, p0);
            let p = match (u() * 3.0) as u32 {
                0 => p0,
                k => {
                    let want = if k == 1 { r } else { 3.0 * r } * (1.0 + (u() - 0.5) * 1e-12);
                    let f = want / d0.max(1e-9);
                    LngLat { lng: c.lng + wrap_deg(p0.lng - c.lng) * f, lat: c.lat + (p0.lat - c.lat) * f }
                }
            };
            let d = near_m(c, p);
            let exact = if d <= r {
                Ring::Within
            } else if d > 3.0 * r {
                Ring::Beyond
            } else {
                Ring::Between
            };
            assert_eq!(NearScan::new(lat0).ring(c, p, r), exact, "{c:?} {p:?} {r}");
            settled += usize::from((d - r).abs() > 1e-6 && (d - 3.0 * r).abs() > 1e-6);
        }
        assert!(settled > 1000);
    }

    #[test]
    fn distances_with_a_cosine_taken_once_stay_within_their_bound_of_near_m() {
        // Around one fix: within 0.01 % inside 100 m, at any latitude below 80°.
        let mut checked = 0;
        for lat in [0.0, 30.0, 52.5, 70.0, 79.9] {
            let near = NearScan::new(lat);
            let i = LngLat { lng: 13.4, lat };
            for (dx, dy) in [(9e-4, 0.0), (0.0, 8e-4), (6e-4, -6e-4), (-8e-4, 3e-4)] {
                let p = LngLat { lng: 13.4 + dx, lat: lat + dy };
                if near_m(i, p) <= 100.0 {
                    assert!((near.m(i, p) / near_m(i, p) - 1.0).abs() < 1e-4, "{lat} {dx} {dy}");
                    checked += 1;
                }
            }
        }
        assert!(checked >= 15, "{checked}");
        // Along a 300 km trace north at 52°: within 0.03 %, a cosine every 0.01° of latitude.
        let mut along = Along::default();
        let (mut taken, mut last) = (0, f64::NAN);
        for k in 0..30_000 {
            let a = LngLat { lng: 13.4 + (k as f64 * 0.37).sin() * 1e-3, lat: 52.0 + k as f64 * 1e-4 };
            let b = LngLat { lng: a.lng + 2e-4, lat: a.lat + 1e-4 };
            let (m, exact) = (along.m(a, b), near_m(a, b));
            assert!((m / exact - 1.0).abs() < 3e-4, "step {k}: {m} against {exact}");
            let lat0 = along.0.as_ref().map(|s| s.lat0).unwrap_or_default();
            taken += usize::from(lat0 != last);
            last = lat0;
        }
        assert!((250..=350).contains(&taken), "{taken} cosines");
    }

    #[test]
    fn a_sharp_real_turn_at_sparse_sampling_is_kept() {
        // 15 m/s, a fix every 60 s, a right angle and a U-turn.
        let fixes = [fix(0.0, 0.0, 0, None), fix(900.0, 0.0, 60, None), fix(900.0, 900.0, 120, None)];
        let refs: Vec<&Location> = fixes.iter().collect();
        assert!(judge(&refs).iter().all(Option::is_none));
        // A U-turn is an out-and-back like a spike: the speed around it tells them apart.
        let back = [
            fix(-900.0, 0.0, -60, Some(5.0)),
            fix(0.0, 0.0, 0, Some(5.0)),
            fix(900.0, 0.0, 60, Some(5.0)),
            fix(0.0, 10.0, 120, Some(5.0)),
            fix(-900.0, 10.0, 180, Some(5.0)),
        ];
        let refs: Vec<&Location> = back.iter().collect();
        assert!(judge(&refs).iter().all(Option::is_none));
    }

    #[test]
    fn a_loop_right_after_the_first_fix_is_kept_and_a_spike_there_is_not() {
        // 30 s apart: 240 m west, back 230 m south-east, then waiting (a held fix) and on.
        let at = [(0.0, 0.0, 0), (-240.0, -20.0, 31), (-60.0, -170.0, 76), (-60.0, -170.0, 107), (60.0, -255.0, 152)];
        let fixes: Vec<Location> = at.iter().map(|&(x, y, t)| fix(x, y, t, None)).collect();
        let refs: Vec<&Location> = fixes.iter().collect();
        assert!(judge(&refs).iter().all(Option::is_none), "{:?}", judge(&refs));
        // The same 240 m one second after the first fix, and back: no vehicle.
        let mut spike = fixes.clone();
        spike[1] = fix(-240.0, -20.0, 1, None);
        spike[2] = fix(5.0, -3.0, 2, None);
        let refs: Vec<&Location> = spike.iter().collect();
        assert_eq!(judge(&refs)[1], Some(Exclusion::Outlier), "{:?}", judge(&refs));
    }

    #[test]
    fn online_holds_a_jump_until_its_successor_decides() {
        let mut f = OnlineFilter::default();
        assert_eq!(f.push(&fix(0.0, 0.0, 0, Some(5.0))).len(), 0, "the first fix waits for a second");
        assert_eq!(f.push(&fix(10.0, 0.0, 1, Some(5.0))).len(), 2);
        assert_eq!(f.push(&fix(20.0, 0.0, 2, Some(5.0))).len(), 1);
        // A spike: held, then dropped when the path goes on where it was.
        assert_eq!(f.push(&fix(30.0, 400.0, 3, Some(5.0))).len(), 0);
        let got = f.push(&fix(40.0, 0.0, 4, Some(5.0)));
        assert_eq!(got.len(), 1);
        assert!((got[0].coordinates.lat - 52.0).abs() < 1e-9);
        // A real acceleration: held, then confirmed by the next fix.
        assert_eq!(f.push(&fix(200.0, 0.0, 10, Some(5.0))).len(), 0);
        assert_eq!(f.push(&fix(230.0, 0.0, 11, Some(5.0))).len(), 2);
        // The trip ends on a held fix: judged on its predecessor.
        assert_eq!(f.push(&fix(3000.0, 0.0, 12, Some(5.0))).len(), 0);
        assert!(f.finish().is_none());
    }
}
