//! What every handler shares, built once per process (once per Lambda cold start).

use std::sync::Arc;

use crate::config::Env;
use crate::store::{DynamoStore, EmbeddedStore, Store, StoreError, TableNames};

#[derive(Clone)]
pub struct AppState {
    pub store: Arc<dyn Store>,
    pub config: Arc<Config>,
    /// Woken when webhook messages may have been queued (the local delivery worker listens).
    pub wake: Arc<tokio::sync::Notify>,
}

#[derive(Debug, Clone)]
pub struct Config {
    /// Base of `trip_tracking_url` links (env `WAYMARK_TRACKING_BASE_URL`).
    pub tracking_base_url: String,
    /// Webhook endpoints may use `http` and private addresses (env
    /// `WAYMARK_WEBHOOK_ALLOW_PRIVATE=1`; local development and tests only).
    pub allow_private_webhooks: bool,
}

impl Config {
    pub fn from_env(env: &Env) -> Self {
        Self {
            tracking_base_url: env.get("WAYMARK_TRACKING_BASE_URL").unwrap_or("http://127.0.0.1:3000/track").to_owned(),
            allow_private_webhooks: crate::domain::webhooks::allow_private(env),
        }
    }
}

impl AppState {
    pub fn new(store: impl Store) -> Self {
        Self {
            store: Arc::new(store),
            config: Arc::new(Config::from_env(Env::process())),
            wake: Arc::new(tokio::sync::Notify::new()),
        }
    }

    /// DynamoDB with table names, region, credentials and endpoint from the environment (how a
    /// Lambda function starts; see `DynamoStore::in_lambda`).
    pub async fn dynamodb_from_env() -> Self {
        Self::new(DynamoStore::in_lambda(TableNames::from_env(Env::process(), "waymark-")))
    }

    /// An in-memory embedded store (tests).
    pub fn memory() -> Result<Self, StoreError> {
        Ok(Self::new(EmbeddedStore::memory()?))
    }
}
