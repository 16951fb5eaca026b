//! Building the SDK client (the configuration chain locally, the environment only in Lambda) and
//! the tables. Retries are the store's (`retry`), so the SDK's are off; its timeouts are the
//! policy's.

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::client::Waiters;
use aws_sdk_dynamodb::types::{AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType};
use futures::future::BoxFuture;

use super::backend;
use super::retry::{ATTEMPT_TIMEOUT, CONNECT_TIMEOUT, LOCAL_ATTEMPT_TIMEOUT};
use crate::store::tables::{PARTITION_KEY, SORT_KEY};
use crate::store::{StoreError, TABLES, TableNames};

/// Connect and attempt timeouts of the retry policy. `WAYMARK_DYNAMODB_ATTEMPT_TIMEOUT_SECS`
/// overrides the attempt's; against a loopback endpoint (DynamoDB Local, a JVM on the same cores,
/// which takes seconds under load) it defaults to [`LOCAL_ATTEMPT_TIMEOUT`].
fn timeouts() -> TimeoutConfig {
    let env = crate::config::Env::process();
    let local =
        env.get("AWS_ENDPOINT_URL_DYNAMODB").is_some_and(|u| u.contains("127.0.0.1") || u.contains("localhost"));
    let default = if local { LOCAL_ATTEMPT_TIMEOUT } else { ATTEMPT_TIMEOUT };
    let attempt = env.seconds("WAYMARK_DYNAMODB_ATTEMPT_TIMEOUT_SECS", default.as_secs());
    TimeoutConfig::builder().connect_timeout(CONNECT_TIMEOUT).operation_attempt_timeout(attempt).build()
}

/// A client from the standard AWS configuration chain. `AWS_ENDPOINT_URL_DYNAMODB` points it at
/// DynamoDB Local; there, when no credentials are configured, dummy ones are used (DynamoDB Local
/// accepts any). HTTPS trusts the bundled roots of [`crate::tls`].
pub(super) fn client_from_env() -> BoxFuture<'static, Client> {
    Box::pin(client_from_chain())
}

async fn client_from_chain() -> Client {
    let started = std::time::Instant::now();
    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .http_client(crate::sdk_http::sdk_http_client())
        .retry_config(RetryConfig::disabled())
        .timeout_config(timeouts());
    let env = crate::config::Env::process();
    let local = env.has("AWS_ENDPOINT_URL_DYNAMODB");
    if local && !env.has("AWS_ACCESS_KEY_ID") && !env.has("AWS_PROFILE") {
        loader = loader.credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "local",
            "local",
            None,
            None,
            "waymark-local",
        ));
    }
    if !env.has("AWS_REGION") && !env.has("AWS_DEFAULT_REGION") {
        loader = loader.region(aws_config::Region::new("us-east-1"));
    }
    let client = Client::new(&loader.load().await);
    tracing::debug!(elapsed = ?started.elapsed(), "DynamoDB client built");
    client
}

/// A client from what Lambda gives every function: region and the function role's credentials
/// in environment variables (`AWS_REGION`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
/// `AWS_SESSION_TOKEN`), plus `AWS_ENDPOINT_URL_DYNAMODB` or `AWS_ENDPOINT_URL` if set. The clock
/// is the SDK's default; retries and timeouts the store's.
pub(super) fn client_in_lambda() -> BoxFuture<'static, Client> {
    let env = crate::config::Env::process();
    let region = ["AWS_REGION", "AWS_DEFAULT_REGION"].iter().find_map(|n| env.get(n)).unwrap_or("us-east-1").to_owned();
    let mut config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(region))
        .credentials_provider(aws_config::environment::EnvironmentVariableCredentialsProvider::new())
        .http_client(crate::sdk_http::sdk_http_client())
        .retry_config(RetryConfig::disabled())
        .timeout_config(timeouts());
    if let Some(url) = ["AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL"].iter().find_map(|n| env.get(n)) {
        config = config.endpoint_url(url);
    }
    Box::pin(std::future::ready(Client::from_conf(config.build())))
}

/// Creates the tables that do not exist yet (on demand, `pk`/`sk` strings), and waits for them.
pub(super) async fn ensure_tables(client: &Client, names: &TableNames) -> Result<(), StoreError> {
    let existing = client.list_tables().send().await.map_err(backend)?.table_names.unwrap_or_default();
    for def in TABLES {
        let name = names.get(def.table);
        if existing.iter().any(|n| n == name) {
            continue;
        }
        let attr =
            |n: &str| AttributeDefinition::builder().attribute_name(n).attribute_type(ScalarAttributeType::S).build();
        let key = |n: &str, t: KeyType| KeySchemaElement::builder().attribute_name(n).key_type(t).build();
        let r = client
            .create_table()
            .table_name(name)
            .attribute_definitions(attr(PARTITION_KEY).map_err(backend)?)
            .attribute_definitions(attr(SORT_KEY).map_err(backend)?)
            .key_schema(key(PARTITION_KEY, KeyType::Hash).map_err(backend)?)
            .key_schema(key(SORT_KEY, KeyType::Range).map_err(backend)?)
            .billing_mode(BillingMode::PayPerRequest)
            .send()
            .await;
        match r {
            Ok(_) => {}
            // Another process created it meanwhile.
            Err(e) if e.as_service_error().is_some_and(|s| s.is_resource_in_use_exception()) => {}
            Err(e) => return Err(backend(e)),
        }
        client
            .wait_until_table_exists()
            .table_name(name)
            .wait(std::time::Duration::from_secs(60))
            .await
            .map_err(backend)?;
    }
    Ok(())
}
