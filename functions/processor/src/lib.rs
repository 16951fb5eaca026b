//! Handlers of the two event-driven functions, kept apart from their `main`s so tests feed them
//! real event shapes.

use std::collections::BTreeSet;

use aws_lambda_events::event::dynamodb::Event as StreamEvent;
use serde::Deserialize;
use serde_json::Value;
use shared::pipeline::{erasure, processor, retention};
use shared::project::{KeyKind, Project};
use shared::store::Store;

/// Time a scheduled run spends on unfinished erasures (the function's timeout is 120 s).
const ERASURE_SWEEP: std::time::Duration = std::time::Duration::from_secs(60);

#[derive(Deserialize)]
struct Keys {
    pk: String,
    #[serde(default)]
    sk: String,
}

/// The keys of the items a stream batch wrote (removals are no work).
fn written_keys(event: &StreamEvent) -> impl Iterator<Item = Keys> + '_ {
    let written = event.records.iter().filter(|r| r.event_name != "REMOVE");
    written.filter_map(|r| serde_dynamo::from_item::<_, Keys>(r.change.keys.clone()).ok())
}

/// The (project, user) pairs whose location partitions a stream batch wrote fixes to. Removals
/// (TTL expiry, the retention sweeper) are no work, nor are writes of a history's page counts
/// (sort keys from `~`, see `history_pages`); the stream's filter drops both already.
pub fn users_in(event: &StreamEvent) -> BTreeSet<(String, String)> {
    written_keys(event)
        .filter(|k| !k.sk.starts_with('~'))
        .filter_map(|k| k.pk.split_once('#').map(|(p, u)| (p.to_owned(), u.to_owned())))
        .collect()
}

/// Processor: a stream batch processes each user it names; any other event (the schedule)
/// sweeps every user with unfinished work, then runs the retention sweeper (items written before
/// a project set retention carry no TTL attribute). An error fails the batch, so Lambda retries
/// it, bisects it and finally sends it to the on-failure queue; the sweep still finds the user.
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
    let mut done = 0;
    // A stream batch mostly holds users of a few projects: read each project once.
    let mut accounts = std::collections::HashMap::new();
    for (project_id, user_id) in users_in(&event) {
        let account_id = match accounts.get(&project_id) {
            Some(a) => String::clone(a),
            None => {
                let a = project_account(store, &project_id).await?;
                accounts.insert(project_id.clone(), a.clone());
                a
            }
        };
        let p = Project { project_id, account_id, kind: KeyKind::Secret };
        processor::process_user(store, &p, &user_id).await.map_err(|e| e.msg)?;
        done += 1;
    }
    Ok(serde_json::json!({"processed_users": done}))
}

async fn project_account(store: &dyn Store, project_id: &str) -> Result<String, String> {
    shared::domain::projects::account_of(store, project_id).await.map_err(|e| e.msg)
}

/// Webhook sender: on a stream batch, one delivery pass over the endpoints of the work-mark
/// shards the batch wrote to (nothing to read for a batch that names none: a cold start answers
/// it without a DynamoDB call); on any other event (the schedule), over every endpoint with
/// pending messages, which is what finds retries coming due.
pub async fn send(worker: &shared::domain::webhooks::deliver::Worker, event: &Value) -> Result<Value, String> {
    let next = match event.get("Records") {
        None => worker.run_once().await,
        Some(_) => {
            let stream: StreamEvent =
                serde_json::from_value(event.clone()).map_err(|e| format!("not a DynamoDB stream event: {e}"))?;
            worker.run_shards(work_shards_in(&stream)).await
        }
    };
    let next = next.map_err(|e| e.msg)?;
    Ok(serde_json::json!({"next_attempt_at": next.map(|t| t.format(None))}))
}

/// The work-mark shards (`WORK#<shard>`) a stream batch wrote to; removals are no work.
pub fn work_shards_in(event: &StreamEvent) -> BTreeSet<u32> {
    written_keys(event)
        .filter_map(|k| k.pk.strip_prefix("WORK#").and_then(|s| s.parse().ok()))
        .filter(|s| *s < shared::domain::webhooks::outbox::WORK_SHARDS)
        .collect()
}
