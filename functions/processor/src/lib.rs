//! Handlers of the two event-driven functions, kept apart from their `main`s so tests feed them
//! real event shapes.

use std::collections::BTreeMap;

use aws_lambda_events::event::dynamodb::Event as StreamEvent;
use serde::Deserialize;
use serde_json::Value;
use shared::pipeline::{erasure, processor, retention};
use shared::project::{KeyKind, Project};
use shared::store::Store;

/// Time an invocation of the webhook sender spends on passes that have more due at once.
const SEND_BUDGET: std::time::Duration = std::time::Duration::from_secs(60);
/// Time a scheduled run spends on unfinished erasures (the function's timeout is 120 s).
const ERASURE_SWEEP: std::time::Duration = std::time::Duration::from_secs(60);

#[derive(Deserialize)]
struct Keys {
    pk: String,
    #[serde(default)]
    sk: String,
}

/// The (project, user) pairs whose location partitions a stream batch wrote fixes to, each with
/// its records' sequence numbers. Removals (TTL expiry, the retention sweeper) are no work, nor
/// are writes of a history's page counts (sort keys from `~`, see `history_pages`); the stream's
/// filter drops both already.
pub fn users_in(event: &StreamEvent) -> BTreeMap<(String, String), Vec<String>> {
    let mut users: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for r in event.records.iter().filter(|r| r.event_name != "REMOVE") {
        let Ok(k) = serde_dynamo::from_item::<_, Keys>(r.change.keys.clone()) else { continue };
        if k.sk.starts_with('~') {
            continue;
        }
        if let Some((p, u)) = k.pk.split_once('#') {
            let seqs = users.entry((p.to_owned(), u.to_owned())).or_default();
            seqs.extend(r.change.sequence_number.clone());
        }
    }
    users
}

/// The answer to a stream batch with `ReportBatchItemFailures` (template.yaml): the records of
/// the users whose pass failed. Lambda sends the batch again from the earliest of them; the
/// other users' passes are done, and doing one again changes nothing (a pass resumes from its
/// watermark), so a failing user neither blocks nor repeats the rest.
fn batch_item_failures(failed: impl IntoIterator<Item = String>) -> Value {
    Value::Array(failed.into_iter().map(|id| serde_json::json!({"itemIdentifier": id})).collect())
}

/// Processor: a stream batch processes each user it names; any other event (the schedule)
/// sweeps every user with unfinished work, then runs the retention sweeper (items written before
/// a project set retention carry no TTL attribute). A user whose pass fails is reported in
/// `batchItemFailures`; the others are done. The sweep finds a failed user's batch mark too.
pub async fn process(store: &dyn Store, event: Value) -> Result<Value, String> {
    if event.get("Records").is_none() {
        let n = processor::sweep(store).await.map_err(|e| e.msg)?;
        // Erasures a DELETE left unfinished (it answered 202): within this invocation's timeout.
        let deadline = std::time::Instant::now() + ERASURE_SWEEP;
        let erased = erasure::sweep(store, deadline).await.map_err(|e| e.msg)?;
        let r = retention::sweep(store, retention::Budget::run(), shared::time::Timestamp::now())
            .await
            .map_err(|e| e.msg)?;
        return Ok(serde_json::json!({"swept_users": n, "erased_users": erased, "expired_items": r.items}));
    }
    let event: StreamEvent = serde_json::from_value(event).map_err(|e| format!("not a DynamoDB stream event: {e}"))?;
    let (mut done, mut failed) = (0, Vec::new());
    // A stream batch mostly holds users of a few projects: read each project once.
    let mut accounts = std::collections::HashMap::new();
    for ((project_id, user_id), seqs) in users_in(&event) {
        let account_id = match accounts.get(&project_id) {
            Some(a) => Ok(String::clone(a)),
            None => project_account(store, &project_id).await,
        };
        let pass = match account_id {
            Ok(account_id) => {
                accounts.insert(project_id.clone(), account_id.clone());
                let p = Project { project_id, account_id, kind: KeyKind::Secret };
                processor::process_user(store, &p, &user_id).await.map_err(|e| e.msg)
            }
            Err(e) => Err(e),
        };
        match pass {
            Ok(_) => done += 1,
            Err(e) => {
                tracing::warn!(error = %e, user_id = %user_id, "stream pass failed; reported for a retry");
                failed.extend(seqs);
            }
        }
    }
    Ok(serde_json::json!({"processed_users": done, "batchItemFailures": batch_item_failures(failed)}))
}

async fn project_account(store: &dyn Store, project_id: &str) -> Result<String, String> {
    shared::domain::projects::account_of(store, project_id).await.map_err(|e| e.msg)
}

/// Webhook sender: on a stream batch, one delivery pass over the endpoints of the work-mark
/// shards the batch wrote to (nothing to read for a batch that names none: a cold start answers
/// it without a DynamoDB call); on any other event (the schedule), over every endpoint with
/// pending messages, which is what finds retries coming due.
pub async fn send(worker: &shared::domain::webhooks::deliver::Worker, event: &Value) -> Result<Value, String> {
    // Passes go on while work is due at once, within the function's timeout (120 s).
    let deadline = std::time::Instant::now() + SEND_BUDGET;
    if event.get("Records").is_none() {
        let all: Vec<u32> = (0..shared::domain::webhooks::outbox::WORK_SHARDS).collect();
        let next = worker.drain(&all, deadline).await.map_err(|e| e.msg)?;
        return Ok(serde_json::json!({"next_attempt_at": next.map(|t| t.format(None))}));
    }
    let stream: StreamEvent =
        serde_json::from_value(event.clone()).map_err(|e| format!("not a DynamoDB stream event: {e}"))?;
    // A shard whose pass fails is reported with its records (`batchItemFailures`); the others'
    // deliveries are made and recorded.
    let (mut next, mut failed) = (None::<shared::time::Timestamp>, Vec::new());
    for (shard, seqs) in work_shards_in(&stream) {
        match worker.drain(&[shard], deadline).await {
            Ok(Some(t)) => next = Some(next.map_or(t, |n| n.min(t))),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(error = %e.msg, shard, "webhook pass failed; reported for a retry");
                failed.extend(seqs);
            }
        }
    }
    Ok(
        serde_json::json!({"next_attempt_at": next.map(|t| t.format(None)), "batchItemFailures": batch_item_failures(failed)}),
    )
}

/// The work-mark shards (`WORK#<shard>`) a stream batch wrote to, each with its records'
/// sequence numbers; removals are no work.
pub fn work_shards_in(event: &StreamEvent) -> BTreeMap<u32, Vec<String>> {
    let mut shards: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for r in event.records.iter().filter(|r| r.event_name != "REMOVE") {
        let Ok(k) = serde_dynamo::from_item::<_, Keys>(r.change.keys.clone()) else { continue };
        let Some(shard) = k.pk.strip_prefix("WORK#").and_then(|s| s.parse().ok()) else { continue };
        if shard < shared::domain::webhooks::outbox::WORK_SHARDS {
            shards.entry(shard).or_default().extend(r.change.sequence_number.clone());
        }
    }
    shards
}
