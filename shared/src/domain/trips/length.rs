//! How long a cleaned path is: the smoothed path, simplified, or the recorded one less its noise
//! along the curve through its points (see `route` for where the nodes come from).

use super::gps;
use crate::geometry::LngLat;

/// Consecutive fixes further apart than this (seconds) leave a gap.
pub const GAP_SECONDS: i64 = 120;

/// Chords a step's curve is measured on ([`curve_m`]): a quarter turn's arc is then within
/// 0.3 % of its length.
const CURVE_PARTS: usize = 8;

/// A point of the cleaned path: where the smoother puts it, where and when it was recorded (ms:
/// first and last, a stop's arrival and departure), and what its noise adds to the square of a
/// step's length (m²; 0 for a stop's centroid, an average of many fixes).
pub(super) struct Node {
    pub(super) smoothed: LngLat,
    pub(super) recorded: LngLat,
    pub(super) ms: (i64, i64),
    pub(super) noise2: f64,
}

/// Meters from each node to the next (`[0]` is 0), stretch by stretch between stops, along one
/// of two paths through the nodes: the smoothed positions simplified at `tolerance` meters
/// (what wiggle smoothing leaves at dense sampling is dropped), or the recorded ones less what
/// their noise adds. Noise of per-axis variance v at each end lengthens a step of true length ℓ on
/// average to d with E[d²] = ℓ² + 2 (va + vb), so √(d² − 2 (va + vb)) is that step without its
/// noise. What counts is the noise from one fix to the next, which a fix's reported accuracy
/// overstates (GPS error drifts slowly): it is read off the fixes instead, from how far each
/// lies off its neighbours' line (s, [`gps::residual_sigma`]). For noise that drifts as a
/// random walk, v = 2 s² is exact; for white noise it is 4/3 of the truth, erring towards the
/// smoothed path. A smoothed path shorter than the recorded one so corrected has cut real
/// corners (fixes sparser than the turns, a smoother told the fixes are worse than they are,
/// timestamps that jitter), not noise, and the recorded path counts; where noise dominates
/// (slow movement, poor fixes) the corrected steps shrink towards 0 and the smoothed path
/// counts.
///
/// Each recorded step follows the curve through its neighbours ([`curve_m`]) rather than the
/// chord: fixes a few seconds apart cut every corner of the road between them (the plain sum of
/// a fleet car's 15 s fixes reads 4 % short of its map-matched route). Across a gap
/// ([`GAP_SECONDS`]) the neighbours say nothing of the way taken, and the straight line counts.
pub(super) fn path_steps(nodes: &[Node], stop_nodes: &[usize], tolerance: f64) -> Vec<f64> {
    let mut steps = vec![0.0; nodes.len()];
    let mut from = 0;
    for to in stop_nodes.iter().copied().chain([nodes.len().saturating_sub(1)]) {
        if to <= from {
            continue;
        }
        let smoothed = simplified(&nodes[from..=to], tolerance);
        let recorded: Vec<f64> = (from + 1..=to)
            .map(|k| {
                let (a, b) = (&nodes[k - 1], &nodes[k]);
                let d = if b.ms.0 - a.ms.1 > GAP_SECONDS * 1000 {
                    segment_m(a.recorded, b.recorded)
                } else {
                    let (before, after) =
                        (nodes[k.saturating_sub(2).max(from)].recorded, nodes[(k + 1).min(to)].recorded);
                    // Bends between sparse fixes the curve cannot follow: see `bends`.
                    let (prev, next) = ((k >= from + 2).then_some(before), (k < to).then_some(after));
                    let v = (a.noise2 + b.noise2) / 4.0;
                    curve_m(before, a.recorded, b.recorded, after)
                        * super::bends::unresolved(prev, a.recorded, b.recorded, next, v)
                };
                (d * d - a.noise2 - b.noise2).max(0.0).sqrt()
            })
            .collect();
        let chosen = if recorded.iter().sum::<f64>() > smoothed.iter().sum::<f64>() { recorded } else { smoothed };
        steps[from + 1..=to].copy_from_slice(&chosen);
        from = to;
    }
    steps
}

/// Meters from each node of a stretch to the next along its smoothed path simplified by
/// Ramer–Douglas–Peucker at `tolerance` meters (in a local flat frame; geo's epsilon is in the
/// coordinates' units): a node between two kept ones takes its share of their chord by index.
fn simplified(stretch: &[Node], tolerance: f64) -> Vec<f64> {
    use geo::SimplifyIdx;
    let frame = super::smooth::Frame::around(stretch.iter().map(|n| n.smoothed));
    let line: geo::LineString<f64> = stretch
        .iter()
        .map(|n| {
            let (x, y) = frame.to_xy(n.smoothed);
            geo::Coord { x, y }
        })
        .collect();
    let kept = if stretch.len() < 3 { (0..stretch.len()).collect() } else { line.simplify_idx(tolerance) };
    let mut steps = vec![0.0; stretch.len() - 1];
    for w in kept.windows(2) {
        let (a, b) = (w[0], w[1]);
        let d = segment_m(stretch[a].smoothed, stretch[b].smoothed) / (b - a) as f64;
        steps[a..b].fill(d);
    }
    steps
}

/// Meters along the centripetal Catmull–Rom curve from `p1` to `p2` (`p0` before them, `p3`
/// after; a repeated end point where there is none): the smooth path through the positions,
/// parametrized by distance, not time, so that late timestamps do not bend it. Measured on
/// [`CURVE_PARTS`] chords in a flat frame at `p1`, scaled to the WGS 84 length of the chord.
/// Centripetal parametrization never loops or overshoots into cusps (Yuksel et al., 2011).
fn curve_m(p0: LngLat, p1: LngLat, p2: LngLat, p3: LngLat) -> f64 {
    let chord = segment_m(p1, p2);
    if chord == 0.0 {
        return 0.0;
    }
    let kx = p1.lat.to_radians().cos();
    let xy = |p: LngLat| (gps::wrap_deg(p.lng - p1.lng) * kx, p.lat - p1.lat);
    let [a, b, c, d] = [p0, p1, p2, p3].map(xy);
    // Not `hypot`: its guard against overflow, out of reach at these sizes, cost more than the
    // rest of this function (eleven lengths a step).
    let len = |u: (f64, f64), v: (f64, f64)| ((v.0 - u.0).powi(2) + (v.1 - u.1).powi(2)).sqrt();
    let knot = |u: (f64, f64), v: (f64, f64)| len(u, v).sqrt();
    let t1 = knot(a, b);
    let t2 = t1 + knot(b, c);
    let t3 = t2 + knot(c, d);
    // Barry and Goldman's pyramid; a knot span of 0 (a repeated end) contributes its point.
    let lerp = |u: (f64, f64), v: (f64, f64), tu: f64, tv: f64, t: f64| {
        let w = if tv > tu { (t - tu) / (tv - tu) } else { 0.0 };
        (u.0 + (v.0 - u.0) * w, u.1 + (v.1 - u.1) * w)
    };
    let point = |t: f64| {
        let (a1, a2, a3) = (lerp(a, b, 0.0, t1, t), lerp(b, c, t1, t2, t), lerp(c, d, t2, t3, t));
        lerp(lerp(a1, a2, 0.0, t2, t), lerp(a2, a3, t1, t3, t), t1, t2, t)
    };
    let (mut prev, mut along) = (b, 0.0);
    for i in 1..=CURVE_PARTS {
        let q = point(t1 + (t2 - t1) * i as f64 / CURVE_PARTS as f64);
        along += len(prev, q);
        prev = q;
    }
    along * chord / len(b, c)
}

/// Meters between consecutive path points on the WGS 84 ellipsoid: for a short segment (most
/// of them, and the cost of a 100,000-point summary) the ellipsoid's local radii of curvature
/// at the mean latitude, within a millimetre per kilometre of the geodesic; Karney's geodesic
/// for longer ones.
pub(super) fn segment_m(a: LngLat, b: LngLat) -> f64 {
    const A: f64 = 6_378_137.0;
    const E2: f64 = 0.006_694_379_990_14;
    if gps::near_m(a, b) > 2_000.0 {
        return a.distance_m(b);
    }
    let phi = ((a.lat + b.lat) * 0.5).to_radians();
    let w = 1.0 - E2 * phi.sin().powi(2);
    let (meridian, normal) = (A * (1.0 - E2) / (w * w.sqrt()), A / w.sqrt());
    let dlng = gps::wrap_deg(b.lng - a.lng).to_radians();
    let (x, y) = (dlng * normal * phi.cos(), (b.lat - a.lat).to_radians() * meridian);
    (x * x + y * y).sqrt()
}
