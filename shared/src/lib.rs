//! Waymark's shared library: envelopes, errors, auth, time, paging, geometry, ids, storage and the
//! domain logic every function calls. Handlers parse and validate, then call `domain`; the domain
//! talks to `store`; only `store` knows how items are laid out in DynamoDB.

pub mod apigw;
pub mod auth;
pub mod body;
pub mod config;
pub mod domain;
pub mod envelope;
pub mod error;
pub mod expiry;
pub mod extract;
pub mod geometry;
pub mod http;
pub mod http_error;
pub mod ids;
pub mod lambda;
pub mod metadata;
pub mod pages;
pub mod paging;
pub mod pipeline;
pub mod project;
pub mod request_id;
pub mod sdk_http;
pub mod state;
pub mod stats;
pub mod store;
pub mod streamed;
pub mod time;
pub mod tls;
pub mod ttl_cache;

pub use envelope::{Envelope, GpxFile, V2Envelope};
pub use error::ApiError;
pub use extract::{ApiJson, Params, V2Json, V2Params};
pub use http_error::V2Error;
pub use state::AppState;
