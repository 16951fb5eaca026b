//! A geofence's shape as a request gives it: a circle's center and radius, or a polygon's ring.

use super::*;

/// A radius from 50 to 1000 meters: a JSON number, integer or not (`130.0` as Roam's clients
/// send it), kept to the nearest whole meter. The range holds before rounding: 49.5 is refused,
/// not rounded into it.
pub fn parse_radius(v: Option<&Value>) -> Result<u32, ApiError> {
    let v = v.ok_or_else(|| ApiError::field("geometry_radius", "is required for a circle (50 to 1000 meters)"))?;
    v.as_f64()
        .filter(|r| (*RADIUS_M.start() as f64..=*RADIUS_M.end() as f64).contains(r))
        .map(|r| r.round() as u32)
        .ok_or_else(|| ApiError::field("geometry_radius", format!("{v} is not a number from 50 to 1000 (meters)")))
}

/// The geometry of a create: `geometry_type` when given, else inferred from `coordinates` (a
/// position is a circle's center; an array of positions, or of rings, is a polygon).
pub fn infer_geometry(given: Option<&str>, coordinates: &Value) -> Result<GeometryType, ApiError> {
    if let Some(t) = given.map(str::trim).filter(|t| !t.is_empty()) {
        return GeometryType::parse("geometry_type", t);
    }
    match coordinates.as_array().and_then(|a| a.first()) {
        Some(Value::Number(_)) => Ok(GeometryType::Circle),
        Some(Value::Array(_)) => Ok(GeometryType::Polygon),
        _ => Err(ApiError::field(
            "coordinates",
            "is [longitude, latitude] for a circle or an array of [longitude, latitude] positions for a polygon",
        )),
    }
}

/// Parse a polygon ring: `[[lng, lat], ...]` (or GeoJSON's `[[[lng, lat], ...]]`), closed if
/// open, at least 3 distinct points, no self-intersection.
pub fn parse_ring(v: &Value) -> Result<Vec<LngLat>, ApiError> {
    let field = "coordinates";
    let rings: Vec<Vec<Vec<f64>>> = match serde_json::from_value::<Vec<Vec<f64>>>(v.clone()) {
        Ok(r) => vec![r],
        Err(_) => serde_json::from_value(v.clone())
            .map_err(|_| ApiError::field(field, "a polygon is an array of [longitude, latitude] positions"))?,
    };
    let mut ring: Vec<Vec<f64>> = rings.into_iter().next().unwrap_or_default();
    if ring.len() > MAX_VERTICES {
        return Err(ApiError::field(field, format!("at most {MAX_VERTICES} positions")));
    }
    if !ring.is_empty() && ring.first() != ring.last() {
        ring.push(ring[0].clone());
    }
    let poly = GeoPolygon::from_ring(field, &ring).map_err(|_| {
        ApiError::field(field, "a polygon needs at least 3 distinct [longitude, latitude] positions in range")
    })?;
    let pts = poly.coordinates.into_iter().next().unwrap_or_default();
    let mut distinct = pts[..pts.len() - 1].to_vec();
    distinct.sort_by(|a, b| a.lng.total_cmp(&b.lng).then(a.lat.total_cmp(&b.lat)));
    distinct.dedup();
    if distinct.len() < 3 {
        return Err(ApiError::field(field, "a polygon needs at least 3 distinct positions"));
    }
    // geo's validity check accepts a ring of collinear points; a fence needs an area.
    if geo::Area::unsigned_area(&polygon(&pts)) < 1e-12 {
        return Err(ApiError::field(field, "the polygon has no area (its points are on one line)"));
    }
    if !geo::Validation::is_valid(&polygon(&pts)) {
        return Err(ApiError::field(field, "the polygon's edges cross each other or it has no area"));
    }
    Ok(pts)
}

/// A shape's center, circle radius and polygon ring from `coordinates` and `geometry_radius`.
pub(super) type ParsedShape = (LngLat, Option<u32>, Option<Vec<LngLat>>);

pub(super) fn parse_shape(
    kind: GeometryType,
    coordinates: &Value,
    radius: Option<&Value>,
) -> Result<ParsedShape, ApiError> {
    match kind {
        GeometryType::Circle => {
            let c: Vec<f64> = serde_json::from_value(coordinates.clone())
                .map_err(|_| ApiError::field("coordinates", "a circle's center is [longitude, latitude]"))?;
            Ok((LngLat::parse("coordinates", &c)?, Some(parse_radius(radius)?), None))
        }
        GeometryType::Polygon => {
            let ring = parse_ring(coordinates)?;
            let c = geo::Centroid::centroid(&polygon(&ring))
                .ok_or_else(|| ApiError::field("coordinates", "the polygon has no area"))?;
            Ok((LngLat { lng: c.x(), lat: c.y() }, None, Some(ring)))
        }
    }
}
