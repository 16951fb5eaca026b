//! Nearby users search: `GET /v1/api/search/users/?location=<lat>,<lng>` (or `user_id=`),
//! `radius` 100 to 10,000 m (1000 by default), `group_id`, paged by `page_number` and
//! `page_limit`, as Roam documents it.
//!
//! Nearby geofence search: `GET /v1/api/search/geofences/?location=<lat>,<lng>&radius=<m>`
//! (or `user_id=` for the user's latest location; `radius` 1000 m when left out, at most
//! 10,000), nearest first, `page_limit` per page.
//!
//! The users in a map's view: `GET /v1/api/users/positions/?bbox=…` ([`positions`]); the
//! geofences in it: `GET /v1/api/geofences/in-view/?bbox=…` ([`fences_in_view`]).

use axum::Router;
use axum::extract::State;
use axum::response::Response;
use axum::routing::get;
use serde_json::{Value, json};
use shared::auth::SecretKey;
use shared::domain::geofences;
use shared::domain::users;
use shared::geometry::{LngLat, SearchRadius};
use shared::http::route;
use shared::{ApiError, AppState, Envelope, Params};

/// `page_limit`: entries per page, 1 to 100, default 10.
pub const MAX_PAGE_LIMIT: usize = 100;

mod fences_in_view;
mod positions;

pub fn router() -> Router<AppState> {
    let r = route(Router::new(), "/v1/api/search/geofences/", get(search));
    let r = route(r, "/v1/api/search/users/", get(search_users));
    let r = route(r, "/v1/api/users/positions/", get(positions::positions));
    route(r, "/v1/api/geofences/in-view/", get(fences_in_view::fences_in_view))
}

/// `lat,lng` as the interface's sample writes it.
fn parse_location(s: &str) -> Result<LngLat, ApiError> {
    let bad = || ApiError::field("location", format!("'{s}' is not 'latitude,longitude' in degrees"));
    let (lat, lng) = s.split_once(',').ok_or_else(bad)?;
    let lat: f64 = lat.trim().parse().map_err(|_| bad())?;
    let lng: f64 = lng.trim().parse().map_err(|_| bad())?;
    LngLat::parse("location", &[lng, lat])
}

/// The point searched from: `location`, or the latest location of `user_id`.
async fn origin(
    store: &dyn shared::store::Store,
    p: &shared::project::Project,
    q: &Params,
) -> Result<LngLat, ApiError> {
    match (q.opt("location"), q.opt("user_id")) {
        (Some(l), None) => parse_location(l),
        (None, Some(u)) => {
            let user = users::require(store, p, "user_id", u).await?;
            user.last_location_update
                .map(|l| l.coordinates)
                .ok_or_else(|| ApiError::field("user_id", "the user has no location yet"))
        }
        (Some(_), Some(_)) => Err(ApiError::field("location", "give location or user_id, not both")),
        (None, None) => Err(ApiError::field("location", "is required (latitude,longitude), or user_id")),
    }
}

/// `page_limit`: 1 to 100, default 10.
fn page_limit(q: &Params) -> Result<usize, ApiError> {
    match q.opt("page_limit") {
        None => Ok(10),
        Some(l) => l.parse::<usize>().ok().filter(|n| (1..=MAX_PAGE_LIMIT).contains(n)).ok_or_else(|| {
            ApiError::field("page_limit", format!("'{l}' is not a whole number from 1 to {MAX_PAGE_LIMIT}"))
        }),
    }
}

/// One page of `items` (`page_number`, `page_limit` long) with its paging fields.
fn page_of(items: Vec<Value>, page: usize, limit: usize, key: &str) -> Value {
    let total = items.len();
    let list: Vec<Value> = items.into_iter().skip((page - 1) * limit).take(limit).collect();
    page_of_shown(list, total, page, limit, key)
}

/// The page object for `list`, page `page` of `total` items.
fn page_of_shown(list: Vec<Value>, total: usize, page: usize, limit: usize, key: &str) -> Value {
    let (next_page, pages, prev_page) = paging(total, page, limit);
    json!({"next_page": next_page, "pages": pages, "prev_page": prev_page, key: list})
}

/// `next_page`, `pages` and `prev_page` of page `page` of `total` items, `limit` a page.
fn paging(total: usize, page: usize, limit: usize) -> (Option<usize>, usize, Option<usize>) {
    let pages = total.div_ceil(limit);
    ((page < pages).then_some(page + 1), pages, (page > 1 && pages > 0).then_some((page - 1).min(pages)))
}

async fn search_users(
    SecretKey(p): SecretKey,
    State(s): State<AppState>,
    q: Params,
) -> Result<Envelope<Value>, ApiError> {
    use shared::domain::nearby;
    let store = s.store.as_ref();
    q.only(&["location", "user_id", "radius", "group_id", "page_number", "page_limit"])?;
    let radius = SearchRadius::parse(q.opt("radius"), SearchRadius::MIN_USERS_M)?.0;
    let at = origin(store, &p, &q).await?;
    let limit = page_limit(&q)?;
    let page = q.page_number()?.0;
    let found = nearby::users_near(store, &p, at, radius, q.opt("group_id")).await?;
    let items = found.iter().map(nearby::nearby_json).collect();
    Ok(Envelope::ok(shared::envelope::SUCCESS, page_of(items, page, limit, "users")))
}

/// A page of found fences, fields sorted; the fences written in by hand
/// ([`geofences::write_found`]).
struct FencesPage {
    geofences: Vec<geofences::FoundView>,
    next_page: Option<usize>,
    pages: usize,
    prev_page: Option<usize>,
}

impl FencesPage {
    fn write_to(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        use serde::ser::SerializeMap;
        let mut m = shared::envelope::ObjectWriter::new(out);
        m.entry_written("geofences", |out| geofences::write_found(&self.geofences, out))?;
        m.serialize_entry("next_page", &self.next_page)?;
        m.serialize_entry("pages", &self.pages)?;
        m.serialize_entry("prev_page", &self.prev_page)?;
        m.end()
    }
}

async fn search(SecretKey(p): SecretKey, State(s): State<AppState>, q: Params) -> Result<Response, ApiError> {
    let store = s.store.as_ref();
    q.only(&["location", "user_id", "radius", "page_limit", "page_number"])?;
    let radius = SearchRadius::parse(q.opt("radius"), 0.0)?.0;
    let at = origin(store, &p, &q).await?;
    let limit = page_limit(&q)?;
    let page = q.page_number()?.0;
    // The page's fences and how many were found in all (for `pages`), without reading them all.
    let (shown, total) = geofences::search_page(store, &p, at, radius, page, limit).await?;
    let geofences = shown.iter().map(|h| h.view()).collect::<Result<Vec<_>, _>>()?;
    let bytes = geofences.iter().map(|g| g.size_hint()).sum::<usize>();
    let (next_page, pages, prev_page) = paging(total, page, limit);
    let data = FencesPage { geofences, next_page, pages, prev_page };
    let body = Envelope::ok(shared::envelope::SUCCESS, data).to_json_with(bytes + 4096, FencesPage::write_to);
    Ok(shared::envelope::json_written(axum::http::StatusCode::OK, body))
}
