//! DynamoDB through aws-sdk-dynamodb. Items are mapped with serde_dynamo; this is the only module
//! that sees `AttributeValue`. Reads are strongly consistent so that a write is visible to the
//! next request (read-your-writes, as the embedded store gives). Every call goes through the one
//! retry policy of `retry`.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    AttributeValue, CancellationReason, ConditionCheck, Delete, DeleteRequest, KeysAndAttributes, Put,
    ReturnConsumedCapacity, ReturnValuesOnConditionCheckFailure, Select, TransactWriteItem, Update, WriteRequest,
};
use futures::future::BoxFuture;
use futures::{StreamExt, TryStreamExt};
use tokio::sync::OnceCell;

use super::tables::{PARTITION_KEY, SORT_KEY};
use super::{
    Cond, Doc, EachChunk, Item, MAX_TRANSACT_OPS, Page, Query, SkRange, Store, StoreError, TTL_ATTRIBUTE, Table,
    TableNames, WriteOp, encode_doc, epoch_now, is_expired,
};

mod capacity;
mod client;
mod retry;

use capacity::Meter;
use client::{client_from_env, client_in_lambda};
use retry::Class;

type Av = HashMap<String, AttributeValue>;

/// Conditional puts of one `put_new` batch in flight at once.
const PUT_CONCURRENCY: usize = 32;
/// Most requests of one BatchWriteItem (DynamoDB's limit).
const BATCH_WRITE: usize = 25;
/// BatchWriteItem calls of one `delete_many` in flight at once (up to 200 deletes).
const BATCHES_IN_FLIGHT: usize = 8;
/// Most keys of one BatchGetItem (DynamoDB's limit).
const BATCH_GET: usize = 100;

#[derive(Clone)]
pub struct DynamoStore {
    /// Built on first use: resolving the configuration chain and setting up HTTPS takes a few
    /// milliseconds that a Lambda function would otherwise spend before it can ask for its first
    /// event (see `from_env`).
    client: Arc<OnceCell<Client>>,
    /// How `client` is built. A function pointer chosen by the constructor, so a Lambda binary,
    /// which never calls `from_env`, links none of the configuration chain (STS, SSO, profiles,
    /// IMDS): 1.1 MB of its size.
    make_client: fn() -> BoxFuture<'static, Client>,
    names: TableNames,
    /// Capacity units consumed by this store's calls so far.
    meter: Meter,
    /// Set by [`DynamoStore::sole_writer`].
    sole_writer_since: Option<crate::time::Timestamp>,
}

fn backend<E: std::fmt::Debug>(e: E) -> StoreError {
    StoreError::Backend(format!("{e:?}"))
}

impl DynamoStore {
    /// One BatchWriteItem of deletes; what DynamoDB leaves unprocessed (throttling) is sent again
    /// under the retry policy's backoff, as AWS advises.
    async fn batch_delete(&self, name: &str, mut reqs: Vec<WriteRequest>) -> Result<(), StoreError> {
        let (client, mut tries) = (self.client().await, retry::Tries::new());
        loop {
            let call = client
                .batch_write_item()
                .request_items(name, reqs)
                .return_consumed_capacity(ReturnConsumedCapacity::Total);
            let out = retry::send(|| call.clone().send()).await?;
            self.meter.count(out.consumed_capacity.iter().flatten());
            match out.unprocessed_items.and_then(|mut u| u.remove(name)).filter(|r| !r.is_empty()) {
                None => return Ok(()),
                Some(left) => reqs = left,
            }
            // Unprocessed items are throttling: the policy's backoff and budget.
            if !tries.again(Class::Throttled).await {
                return Err(StoreError::Unavailable(format!("BatchWriteItem on {name}: deletes still unprocessed")));
            }
        }
    }

    /// One BatchGetItem of `keys` (strongly consistent), its items by sort key; what DynamoDB
    /// leaves unprocessed (throttling, or over 16 MB) is asked again under the retry policy's backoff.
    async fn batch_get(&self, name: &str, keys: Vec<Av>, found: &mut HashMap<String, Item>) -> Result<(), StoreError> {
        let mut req =
            KeysAndAttributes::builder().set_keys(Some(keys)).consistent_read(true).build().map_err(backend)?;
        let now = epoch_now();
        let (client, mut tries) = (self.client().await, retry::Tries::new());
        loop {
            let call = client
                .batch_get_item()
                .request_items(name, req)
                .return_consumed_capacity(ReturnConsumedCapacity::Total);
            let out = retry::send(|| call.clone().send()).await?;
            self.meter.count(out.consumed_capacity.iter().flatten());
            for av in out.responses.and_then(|mut r| r.remove(name)).unwrap_or_default() {
                let item = from_av(av)?;
                if let (Some(sk), false) = (item.get(SORT_KEY).and_then(|v| v.as_str()), is_expired(&item, now)) {
                    found.insert(sk.to_owned(), item);
                }
            }
            match out.unprocessed_keys.and_then(|mut u| u.remove(name)).filter(|k| !k.keys.is_empty()) {
                None => return Ok(()),
                Some(left) => req = left,
            }
            if !tries.again(Class::Throttled).await {
                return Err(StoreError::Unavailable(format!("BatchGetItem on {name}: keys still unprocessed")));
            }
        }
    }

    pub fn new(client: Client, names: TableNames) -> Self {
        Self {
            client: Arc::new(OnceCell::new_with(Some(client))),
            make_client: client_from_env,
            names,
            meter: Meter::default(),
            sole_writer_since: None,
        }
    }

    /// The client, built by the first call that needs it.
    async fn client(&self) -> &Client {
        self.client.get_or_init(self.make_client).await
    }

    /// Read and write capacity units consumed by this store's calls so far, as reported.
    pub fn consumed_capacity(&self) -> f64 {
        self.meter.consumed()
    }

    /// [`DynamoStore::consumed_capacity`] with transactions as AWS prices them (`capacity`).
    pub fn priced_capacity(&self) -> f64 {
        self.meter.priced()
    }

    /// A store whose client comes from the standard AWS configuration chain, resolved when the
    /// first call needs it (a cold start asks Lambda for its first event sooner). The chain is
    /// read then; the conditions it fails on are the SDK's as before (credentials were always
    /// resolved lazily), and they fail that call with the SDK's error.
    pub async fn from_env(names: TableNames) -> Self {
        Self {
            client: Arc::new(OnceCell::new()),
            make_client: client_from_env,
            names,
            meter: Meter::default(),
            sole_writer_since: None,
        }
    }

    /// This store as the only writer of its tables from now on (`waymark serve`: a local process
    /// owns its store, tables no other process writes). Never on AWS, where Lambda functions
    /// write the same tables side by side.
    pub fn sole_writer(self) -> Self {
        Self { sole_writer_since: Some(crate::time::Timestamp::now()), ..self }
    }

    /// A store for a Lambda function: the client (built on first use) takes its region,
    /// credentials and endpoint from the environment only (see `client_in_lambda`).
    pub fn in_lambda(names: TableNames) -> Self {
        Self {
            client: Arc::new(OnceCell::new()),
            make_client: client_in_lambda,
            names,
            meter: Meter::default(),
            sole_writer_since: None,
        }
    }

    fn name(&self, t: Table) -> &str {
        self.names.get(t)
    }
}

fn to_av(item: &Item) -> Result<Av, StoreError> {
    serde_dynamo::to_item(item).map_err(|e| StoreError::Corrupt(e.to_string()))
}

fn from_av(av: Av) -> Result<Item, StoreError> {
    serde_dynamo::from_item(av).map_err(|e| StoreError::Corrupt(e.to_string()))
}

fn key_av(pk: &str, sk: &str) -> Av {
    HashMap::from([
        (PARTITION_KEY.to_owned(), AttributeValue::S(pk.to_owned())),
        (SORT_KEY.to_owned(), AttributeValue::S(sk.to_owned())),
    ])
}

/// A condition as (expression, names, values).
type CondExpr = (Option<String>, Option<HashMap<String, String>>, Option<Av>);

/// `builder` with `cond` as its condition expression, names and values: the same three setters on
/// every conditional request and transaction item (the SDK's builders share no trait for them).
macro_rules! conditioned {
    ($builder:expr, $cond:expr) => {{
        let (expr, names, values) = cond_expr($cond)?;
        $builder
            .set_condition_expression(expr)
            .set_expression_attribute_names(names)
            .set_expression_attribute_values(values)
    }};
}

fn cond_expr(cond: &Cond) -> Result<CondExpr, StoreError> {
    Ok(match cond {
        Cond::None => (None, None, None),
        Cond::NotExists => (Some(format!("attribute_not_exists({PARTITION_KEY})")), None, None),
        Cond::Exists => (Some(format!("attribute_exists({PARTITION_KEY})")), None, None),
        Cond::Equals(attr, v) => {
            let v: AttributeValue =
                serde_dynamo::to_attribute_value(v).map_err(|e| StoreError::Corrupt(e.to_string()))?;
            (
                Some("#c = :c".into()),
                Some(HashMap::from([("#c".to_owned(), (*attr).to_owned())])),
                Some(HashMap::from([(":c".to_owned(), v)])),
            )
        }
    })
}

/// Asks a conditional write that fails for the item it met, which tells a try's own earlier
/// write (its answer lost) from another's (free: no capacity is consumed).
fn own_check(cond: &Cond) -> Option<ReturnValuesOnConditionCheckFailure> {
    (*cond != Cond::None).then_some(ReturnValuesOnConditionCheckFailure::AllOld)
}

/// Whether two items are the same, numbers compared by value (DynamoDB gives `5` for `5.0`).
fn same_item(a: &Item, b: &Item) -> bool {
    fn same(a: &serde_json::Value, b: &serde_json::Value) -> bool {
        use serde_json::Value as V;
        match (a, b) {
            (V::Number(x), V::Number(y)) => x.as_f64() == y.as_f64(),
            (V::Array(x), V::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y)),
            (V::Object(x), V::Object(y)) => same_item(x, y),
            _ => a == b,
        }
    }
    a.len() == b.len() && a.iter().all(|(k, v)| b.get(k).is_some_and(|w| same(v, w)))
}

/// What cancelled a transaction, from its reasons: a failed condition stands; throttling and
/// conflicts are retried.
fn cancelled(reasons: &[CancellationReason]) -> Class {
    let has = |code: &str| reasons.iter().any(|r| r.code() == Some(code));
    if has("ConditionalCheckFailed") {
        Class::Condition
    } else if has("ThrottlingError") || has("ProvisionedThroughputExceeded") {
        Class::Throttled
    } else if has("TransactionConflict") {
        Class::Conflict
    } else {
        Class::Final
    }
}

/// A transaction's idempotency token (`ClientRequestToken`, at most 36 characters).
fn client_token() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// One Query call of `q` from `start` (exclusive), reading at most `limit` items (a filter may
/// return fewer).
fn query_call(
    client: &Client,
    table_name: &str,
    q: &Query,
    start: Option<Av>,
    limit: Option<usize>,
) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder {
    let (expr, mut values) = key_condition(q);
    let (filter, names) = if q.with_expired { (None, None) } else { unzip(unexpired(&mut values)) };
    client
        .query()
        .table_name(table_name)
        .key_condition_expression(expr)
        .set_filter_expression(filter)
        .set_expression_attribute_names(names)
        .set_expression_attribute_values(Some(values))
        .scan_index_forward(!q.descending)
        .consistent_read(!q.eventual)
        .set_limit(limit.map(|r| r.min(i32::MAX as usize) as i32))
        .set_exclusive_start_key(start)
        .return_consumed_capacity(ReturnConsumedCapacity::Total)
}

/// The key condition of a query and its values.
fn key_condition(q: &Query) -> (String, Av) {
    let mut values = HashMap::from([(":pk".to_owned(), AttributeValue::S(q.pk.clone()))]);
    let expr = match &q.range {
        SkRange::All => "pk = :pk".to_owned(),
        SkRange::Prefix(p) => {
            values.insert(":a".into(), AttributeValue::S(p.clone()));
            "pk = :pk AND begins_with(sk, :a)".to_owned()
        }
        SkRange::Between(a, b) => {
            values.insert(":a".into(), AttributeValue::S(a.clone()));
            values.insert(":b".into(), AttributeValue::S(b.clone()));
            "pk = :pk AND sk BETWEEN :a AND :b".to_owned()
        }
    };
    (expr, values)
}

fn unzip((f, n): (String, HashMap<String, String>)) -> (Option<String>, Option<HashMap<String, String>>) {
    (Some(f), Some(n))
}

/// The filter that leaves out items whose TTL has passed (DynamoDB deletes them only later), its
/// names and values; added to the key condition's values. A TTL attribute that is not a number
/// is no expiry, as for DynamoDB's TTL.
fn unexpired(values: &mut Av) -> (String, HashMap<String, String>) {
    values.insert(":now".into(), AttributeValue::N(epoch_now().to_string()));
    values.insert(":num".into(), AttributeValue::S("N".into()));
    let names = HashMap::from([("#ttl".to_owned(), TTL_ATTRIBUTE.to_owned())]);
    ("attribute_not_exists(#ttl) OR NOT attribute_type(#ttl, :num) OR #ttl > :now".into(), names)
}

#[async_trait]
impl Store for DynamoStore {
    fn bills_by_kilobyte(&self) -> bool {
        true
    }

    fn sole_writer_since(&self) -> Option<crate::time::Timestamp> {
        self.sole_writer_since
    }

    async fn get(&self, table: Table, pk: &str, sk: &str) -> Result<Option<Item>, StoreError> {
        let call = self
            .client()
            .await
            .get_item()
            .table_name(self.name(table))
            .set_key(Some(key_av(pk, sk)))
            .consistent_read(true)
            .return_consumed_capacity(ReturnConsumedCapacity::Total);
        let out = retry::send(|| call.clone().send()).await?;
        self.meter.count(&out.consumed_capacity);
        Ok(out.item.map(from_av).transpose()?.filter(|i| !is_expired(i, epoch_now())))
    }

    async fn put(&self, table: Table, item: Item, cond: Cond) -> Result<(), StoreError> {
        let req = self.client().await.put_item().table_name(self.name(table)).set_item(Some(to_av(&item)?));
        let call = conditioned!(req, &cond)
            .set_return_values_on_condition_check_failure(own_check(&cond))
            .return_consumed_capacity(ReturnConsumedCapacity::Total);
        match retry::send(|| call.clone().send()).await {
            Ok(out) => {
                self.meter.count(&out.consumed_capacity);
                Ok(())
            }
            Err(f) if f.class == Class::Condition => {
                // A try whose answer was lost may have written this very item: the condition then
                // failed on our own write, which stands (a fix stored, not a duplicate).
                let old = match f.error.as_service_error() {
                    Some(PutItemError::ConditionalCheckFailedException(c)) => c.item.clone(),
                    _ => None,
                };
                match old.map(from_av).transpose()? {
                    Some(old) if f.after_unknown && same_item(&old, &item) => Ok(()),
                    _ => Err(StoreError::ConditionFailed),
                }
            }
            Err(f) => Err(f.into()),
        }
    }

    async fn delete(&self, table: Table, pk: &str, sk: &str, cond: Cond) -> Result<(), StoreError> {
        let req = self.client().await.delete_item().table_name(self.name(table)).set_key(Some(key_av(pk, sk)));
        let call = conditioned!(req, &cond)
            .set_return_values_on_condition_check_failure(own_check(&cond))
            .return_consumed_capacity(ReturnConsumedCapacity::Total);
        match retry::send(|| call.clone().send()).await {
            Ok(out) => {
                self.meter.count(&out.consumed_capacity);
                Ok(())
            }
            Err(f) if f.class == Class::Condition => {
                // Gone after a try whose answer was lost: that try deleted it.
                let old = match f.error.as_service_error() {
                    Some(DeleteItemError::ConditionalCheckFailedException(c)) => c.item.as_ref(),
                    _ => None,
                };
                if f.after_unknown && old.is_none() { Ok(()) } else { Err(StoreError::ConditionFailed) }
            }
            Err(f) => Err(f.into()),
        }
    }

    async fn query(&self, table: Table, q: &Query) -> Result<Page, StoreError> {
        let mut start = q.after.as_ref().map(|sk| key_av(&q.pk, sk));
        let mut items = Vec::new();
        loop {
            // With a filter, DynamoDB's Limit counts the items read, not those returned: ask again
            // until `limit` items have passed it.
            let remaining = q.limit.map(|l| l.saturating_sub(items.len()));
            if remaining == Some(0) {
                break;
            }
            let call = query_call(self.client().await, self.name(table), q, start.take(), remaining);
            let out = retry::send(|| call.clone().send()).await?;
            self.meter.count(&out.consumed_capacity);
            for av in out.items.unwrap_or_default() {
                items.push(from_av(av)?);
            }
            match out.last_evaluated_key {
                Some(k) => start = Some(k),
                None => return Ok(Page { items, last_sk: None }),
            }
        }
        // The limit was reached and DynamoDB said more may follow.
        let last_sk = start.and_then(|k| match k.get(SORT_KEY) {
            Some(AttributeValue::S(s)) => Some(s.clone()),
            _ => None,
        });
        Ok(Page { items, last_sk })
    }

    async fn query_docs_each(&self, table: Table, q: &Query, each: &mut EachChunk) -> Result<(), StoreError> {
        // A page (up to 1 MB) at a time, the next one asked for before this one is handed over:
        // DynamoDB reads it while the caller decodes.
        let client = self.client().await;
        let fetch = |start: Option<Av>, limit: Option<usize>| {
            let call = query_call(client, self.name(table), q, start, limit);
            tokio::spawn(async move { retry::send(|| call.clone().send()).await.map_err(StoreError::from) })
        };
        let mut left = q.limit;
        if left == Some(0) {
            return each(Vec::new());
        }
        let mut next = Some(fetch(q.after.as_ref().map(|sk| key_av(&q.pk, sk)), left));
        while let Some(call) = next.take() {
            let out = call.await.map_err(backend)??;
            self.meter.count(&out.consumed_capacity);
            let items = out.items.unwrap_or_default();
            left = left.map(|l| l.saturating_sub(items.len()));
            if let Some(k) = out.last_evaluated_key
                && left != Some(0)
            {
                next = Some(fetch(Some(k), left));
            }
            let docs = items
                .into_iter()
                .map(|av| serde_json::to_vec(&from_av(av)?).map_err(|e| StoreError::Corrupt(e.to_string())))
                .collect::<Result<Vec<_>, _>>();
            if let Err(e) = docs.and_then(&mut *each) {
                // Not needed any more.
                if let Some(call) = next {
                    call.abort();
                }
                return Err(e);
            }
        }
        Ok(())
    }

    async fn count(&self, table: Table, pk: &str, range: &SkRange) -> Result<usize, StoreError> {
        let q = Query::new(pk, range.clone());
        let (expr, mut values) = key_condition(&q);
        let (filter, names) = unexpired(&mut values);
        let mut start = None;
        let mut total = 0usize;
        loop {
            let call = self
                .client()
                .await
                .query()
                .table_name(self.name(table))
                .key_condition_expression(&expr)
                .filter_expression(&filter)
                .set_expression_attribute_names(Some(names.clone()))
                .set_expression_attribute_values(Some(values.clone()))
                .select(Select::Count)
                .consistent_read(true)
                .set_exclusive_start_key(start.take())
                .return_consumed_capacity(ReturnConsumedCapacity::Total);
            let out = retry::send(|| call.clone().send()).await?;
            self.meter.count(&out.consumed_capacity);
            total += out.count.max(0) as usize;
            match out.last_evaluated_key {
                Some(k) => start = Some(k),
                None => return Ok(total),
            }
        }
    }

    async fn transact(&self, mut ops: Vec<WriteOp>) -> Result<(), StoreError> {
        // One write alone is as atomic as a transaction of it, at half the capacity (the page
        // counts of a single list: `history_pages`).
        if ops.len() == 1 {
            match ops.pop() {
                Some(WriteOp::Put { table, item, cond }) => return self.put(table, item, cond).await,
                Some(WriteOp::Delete { table, pk, sk, cond }) => return self.delete(table, &pk, &sk, cond).await,
                other => ops.extend(other),
            }
        }
        if ops.is_empty() {
            return Ok(());
        }
        if ops.len() > MAX_TRANSACT_OPS {
            return Err(StoreError::Backend(format!("transaction of {} operations", ops.len())));
        }
        let mut items = Vec::with_capacity(ops.len());
        for op in &ops {
            let item = match op {
                WriteOp::Put { table, item, cond } => {
                    let put = Put::builder().table_name(self.name(*table)).set_item(Some(to_av(item)?));
                    TransactWriteItem::builder().put(conditioned!(put, cond).build().map_err(backend)?).build()
                }
                WriteOp::Delete { table, pk, sk, cond } => {
                    let del = Delete::builder().table_name(self.name(*table)).set_key(Some(key_av(pk, sk)));
                    TransactWriteItem::builder().delete(conditioned!(del, cond).build().map_err(backend)?).build()
                }
                WriteOp::Add { table, pk, sk, attr, delta } => {
                    let add = Update::builder()
                        .table_name(self.name(*table))
                        .set_key(Some(key_av(pk, sk)))
                        .update_expression("ADD #a :d")
                        .expression_attribute_names("#a", *attr)
                        .expression_attribute_values(":d", AttributeValue::N(delta.to_string()))
                        .build()
                        .map_err(backend)?;
                    TransactWriteItem::builder().update(add).build()
                }
                WriteOp::Check { table, pk, sk, cond } => {
                    let check = ConditionCheck::builder().table_name(self.name(*table)).set_key(Some(key_av(pk, sk)));
                    TransactWriteItem::builder()
                        .condition_check(conditioned!(check, cond).build().map_err(backend)?)
                        .build()
                }
            };
            items.push(item);
        }
        // One client token for the tries of one transaction: a try whose answer was lost and that
        // committed makes the next try's answer that success, not a failed condition (DynamoDB
        // keeps a token 10 minutes). A try cancelled outright applied nothing: a new token then,
        // unless an earlier try's outcome was unknown (it may have committed: a fresh token
        // after it, say for a throttled retry, met its own write as a failed condition).
        let client = self.client().await;
        let mut token = client_token();
        let mut unknown = false;
        let mut tries = retry::Tries::new();
        loop {
            let r = client
                .transact_write_items()
                .set_transact_items(Some(items.clone()))
                .client_request_token(&token)
                .return_consumed_capacity(ReturnConsumedCapacity::Total)
                .send()
                .await;
            let e = match r {
                Ok(out) => {
                    self.meter.count_transaction(&ops, out.consumed_capacity.as_deref().unwrap_or_default());
                    return Ok(());
                }
                Err(e) => e,
            };
            let class = retry::classify(&e, |s| match s {
                TransactWriteItemsError::TransactionCanceledException(c) => Some(cancelled(c.cancellation_reasons())),
                _ => None,
            });
            if !tries.again(class).await {
                return Err(retry::failure(class, e));
            }
            unknown |= class == Class::Unknown;
            if !unknown {
                token = client_token();
            }
        }
    }

    async fn put_new(&self, table: Table, items: Vec<Item>) -> Result<Vec<bool>, StoreError> {
        futures::stream::iter(items)
            .map(|item| async move {
                match self.put(table, item, Cond::NotExists).await {
                    Ok(()) => Ok(true),
                    Err(StoreError::ConditionFailed) => Ok(false),
                    Err(e) => Err(e),
                }
            })
            .buffered(PUT_CONCURRENCY)
            .try_collect()
            .await
    }

    async fn delete_many(&self, table: Table, mut keys: Vec<(String, String)>) -> Result<(), StoreError> {
        // BatchWriteItem: 25 deletes a request at one write unit each (a transaction would cost
        // two), a few requests in flight. A batch may not name a key twice.
        keys.sort_unstable();
        keys.dedup();
        let name = self.name(table).to_owned();
        let batches = keys
            .chunks(BATCH_WRITE)
            .map(|c| {
                c.iter()
                    .map(|(pk, sk)| {
                        let del = DeleteRequest::builder().set_key(Some(key_av(pk, sk))).build().map_err(backend)?;
                        Ok(WriteRequest::builder().delete_request(del).build())
                    })
                    .collect::<Result<Vec<_>, StoreError>>()
            })
            .collect::<Result<Vec<_>, _>>()?;
        futures::stream::iter(batches)
            .map(|b| self.batch_delete(&name, b))
            .buffer_unordered(BATCHES_IN_FLIGHT)
            .try_collect::<()>()
            .await
    }

    async fn get_docs(&self, table: Table, pk: &str, sks: &[String]) -> Result<Vec<Option<Doc>>, StoreError> {
        // BatchGetItem: a page of records in one call (rather than a Query each), the same
        // capacity. A request may not name a key twice.
        let mut distinct: Vec<&String> = sks.iter().collect();
        distinct.sort_unstable();
        distinct.dedup();
        let name = self.name(table);
        let mut found = HashMap::with_capacity(distinct.len());
        for chunk in distinct.chunks(BATCH_GET) {
            self.batch_get(name, chunk.iter().map(|sk| key_av(pk, sk)).collect(), &mut found).await?;
        }
        sks.iter().map(|sk| found.get(sk).map(encode_doc).transpose()).collect()
    }

    async fn scan_all(&self, table: Table) -> Result<Vec<Item>, StoreError> {
        let mut start = None;
        let mut items = Vec::new();
        loop {
            let call = self
                .client()
                .await
                .scan()
                .table_name(self.name(table))
                .consistent_read(true)
                .set_exclusive_start_key(start.take());
            let out = retry::send(|| call.clone().send()).await?;
            for av in out.items.unwrap_or_default() {
                items.push(from_av(av)?);
            }
            match out.last_evaluated_key {
                Some(k) => start = Some(k),
                None => return Ok(items),
            }
        }
    }

    async fn ensure_tables(&self) -> Result<(), StoreError> {
        client::ensure_tables(self.client().await, &self.names).await
    }
}
