//! The functions that are not behind the HTTP API ([`EVENT_FUNCTIONS`]): their stream and
//! schedule sources in template.yaml, their events in `events/`, and those events fed to their
//! handlers (`processor::process`, `processor::send`) on a recording in-memory store, whose
//! DynamoDB actions are held to the function's policies both ways.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_lambda_events::event::dynamodb::Event as StreamEvent;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};
use shared::domain::locations::{self, Location};
use shared::domain::webhooks::{self, deliver};
use shared::pipeline::erasure;
use shared::store::Table;

use crate::events::{Answer::V1, Fixture, Setup};
use crate::support::{
    EVENT_FUNCTIONS, EventFunction, Permission, allowed, event_names, event_text, event_with, resource, template,
};

fn event_function(id: &str) -> &'static EventFunction {
    EVENT_FUNCTIONS.iter().find(|f| f.id == id).unwrap_or_else(|| panic!("{id} is not in EVENT_FUNCTIONS"))
}

#[test]
fn event_functions_have_their_stream_and_schedule() {
    let t = template();
    for f in EVENT_FUNCTIONS {
        let p = &resource(&t, f.id)["Properties"];
        let events = p["Events"].as_object().unwrap_or_else(|| panic!("{}: Events", f.id));
        let of = |kind: &str| -> Vec<(&str, &Value)> {
            events.iter().filter(|(_, e)| e["Type"] == kind).map(|(n, e)| (n.as_str(), &e["Properties"])).collect()
        };
        let (streams, schedules) = (of("DynamoDB"), of("Schedule"));
        assert_eq!(
            (streams.len(), schedules.len(), events.len()),
            (1, 1, 2),
            "{}: one DynamoDB stream event and one Schedule event, nothing else",
            f.id
        );

        let (name, s) = streams[0];
        let at = format!("{}.Events.{name}", f.id);
        assert_eq!(s["Stream"], json!({"Fn::GetAtt": [f.stream_table, "StreamArn"]}), "{at}: Stream");
        let view = &resource(&t, f.stream_table)["Properties"]["StreamSpecification"]["StreamViewType"];
        // The handlers read keys only; any view carries them.
        assert!(
            ["KEYS_ONLY", "NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES"].iter().any(|v| view == v),
            "{}: StreamSpecification.StreamViewType (read by {at}): {view}",
            f.stream_table
        );
        assert_eq!(s["StartingPosition"], "LATEST", "{at}: StartingPosition");
        assert!(s["BatchSize"].as_u64().is_some_and(|b| (1..=10_000).contains(&b)), "{at}: BatchSize");
        assert_eq!(s["BisectBatchOnFunctionError"], true, "{at}: a failing batch is split to isolate a bad record");
        // -1 (the default) retries until the record expires, blocking the shard.
        let retries = s["MaximumRetryAttempts"].as_i64();
        assert!(retries.is_some_and(|r| (1..=100).contains(&r)), "{at}: MaximumRetryAttempts, finite: {retries:?}");
        let age = s["MaximumRecordAgeInSeconds"].as_i64();
        assert!(age.is_some_and(|a| (60..=604_800).contains(&a)), "{at}: MaximumRecordAgeInSeconds: {age:?}");
        let on_failure = &s["DestinationConfig"]["OnFailure"];
        // With Type set, SAM grants sqs:SendMessage on this queue and nothing wider.
        assert_eq!(on_failure["Type"], "SQS", "{at}: DestinationConfig.OnFailure.Type");
        assert_eq!(
            on_failure["Destination"],
            json!({"Fn::GetAtt": [f.failures_queue, "Arn"]}),
            "{at}: DestinationConfig.OnFailure.Destination"
        );
        assert_eq!(resource(&t, f.failures_queue)["Type"], "AWS::SQS::Queue", "{}", f.failures_queue);
        match f.key_prefix {
            None => {
                // Every write of a fix is work (its sort key a hex id); removals (expiry) and the
                // history's page counts (sort keys from `~`) are not.
                let pattern = stream_filter(s).unwrap_or_else(|| panic!("{at}: FilterCriteria with one Pattern"));
                let hex: Vec<Value> = "0123456789abcdef".chars().map(|c| json!({"prefix": c.to_string()})).collect();
                let want = json!({"eventName": ["INSERT", "MODIFY"], "dynamodb": {"Keys": {"sk": {"S": hex}}}});
                assert_eq!(pattern, want, "{at}: {pattern}");
            }
            Some(prefix) => {
                let pattern = stream_filter(s).unwrap_or_else(|| panic!("{at}: FilterCriteria with one Pattern"));
                assert_eq!(pattern["dynamodb"]["Keys"]["pk"]["S"], json!([{"prefix": prefix}]), "{at}: {pattern}");
                // A removal is no work (and the sender removes work marks itself).
                assert_eq!(pattern["eventName"], json!(["INSERT", "MODIFY"]), "{at}: {pattern}");
            }
        }

        let (name, schedule) = schedules[0];
        assert_eq!(schedule["Schedule"], "rate(1 minute)", "{}.Events.{name}", f.id);

        let timeout = p["Timeout"].as_u64().or_else(|| t["Globals"]["Function"]["Timeout"].as_u64()).expect("Timeout");
        assert!((f.min_timeout..=900).contains(&timeout), "{}: Timeout {timeout}, at least {}", f.id, f.min_timeout);
    }
}

/// The one filter pattern of a stream event, parsed.
fn stream_filter(s: &Value) -> Option<Value> {
    let filters = s["FilterCriteria"]["Filters"].as_array()?;
    let [only] = filters.as_slice() else { return None };
    serde_json::from_str(only["Pattern"].as_str()?).ok()
}

/// events/<name>.json of an event function with its placeholders filled in.
fn filled(name: &str, values: &[(&str, &str)]) -> Value {
    serde_json::from_str(&event_with(name, values)).unwrap_or_else(|e| panic!("events/{name}.json: {e}"))
}

#[test]
fn stream_and_schedule_events_are_real_shapes() {
    let t = template();
    let files: BTreeSet<String> = event_names().into_iter().collect();
    let values = [("REPLACE_PROJECT_ID", "p1"), ("REPLACE_USER_ID", "u1"), ("REPLACE_WEBHOOK_ID", "w1")];
    for f in EVENT_FUNCTIONS {
        let [stream, schedule] = f.events else { panic!("{}: events are [stream batch, schedule]", f.id) };
        for name in f.events {
            assert!(files.contains(*name), "{}: events/{name}.json is missing", f.id);
        }

        // A batch as Lambda's stream poller delivers it, which the handler's type reads.
        let v = filled(stream, &values);
        let batch: StreamEvent = serde_json::from_value(v.clone())
            .unwrap_or_else(|e| panic!("events/{stream}.json: not a stream event: {e}"));
        assert!(!batch.records.is_empty(), "{stream}: no Records");
        // The function's filter pattern (stream events are checked against it where it has one).
        let events = resource(&t, f.id)["Properties"]["Events"].as_object().expect("Events");
        let source = events.values().find(|e| e["Type"] == "DynamoDB").expect("a DynamoDB event");
        let pattern = f.key_prefix.map(|_| stream_filter(&source["Properties"]).expect("filter pattern"));
        for (i, r) in v["Records"].as_array().expect("Records").iter().enumerate() {
            assert_eq!(r["eventSource"], "aws:dynamodb", "{stream}: Records[{i}].eventSource");
            let arn = r["eventSourceARN"].as_str().unwrap_or_default();
            assert!(
                arn.contains(&format!(":table/waymark-{}-", f.stream_table)) && arn.contains("/stream/"),
                "{stream}: Records[{i}].eventSourceARN is not the stream of {}: {arn}",
                f.stream_table
            );
            let pk = r["dynamodb"]["Keys"]["pk"]["S"].as_str().unwrap_or_else(|| panic!("{stream}: Records[{i}] pk"));
            assert!(r["dynamodb"]["Keys"]["sk"]["S"].is_string(), "{stream}: Records[{i}] sk");
            if let Some(pattern) = &pattern {
                // What the function's filter lets through.
                let prefix = pattern["dynamodb"]["Keys"]["pk"]["S"][0]["prefix"].as_str().expect("prefix");
                assert!(pk.starts_with(prefix), "{stream}: Records[{i}]: {pk} does not pass {pattern}");
                let names = pattern["eventName"].as_array().expect("eventName");
                assert!(names.contains(&r["eventName"]), "{stream}: Records[{i}].eventName does not pass {pattern}");
            }
        }
        if f.id == "ProcessorFunction" {
            let users = processor::users_in(&batch);
            let keys: Vec<_> = users.keys().cloned().collect();
            assert_eq!(keys, [("p1".to_owned(), "u1".to_owned())], "{stream}: <project>#<user> keys");
            let seqs: Vec<&str> = batch.records.iter().filter_map(|r| r.change.sequence_number.as_deref()).collect();
            assert_eq!(
                users.values().flatten().map(String::as_str).collect::<Vec<_>>(),
                seqs,
                "{stream}: sequence numbers"
            );
            // Removals (TTL expiry, retention) are no work, should one pass the stream's filter.
            let mut removed = batch.clone();
            removed.records.iter_mut().for_each(|r| r.event_name = "REMOVE".into());
            assert!(processor::users_in(&removed).is_empty(), "{stream}: removals name no user");
            // Nor are writes of a history's page counts (sort keys from `~`).
            let mut counts = v.clone();
            for r in counts["Records"].as_array_mut().expect("Records") {
                r["dynamodb"]["Keys"]["sk"] = json!({"S": "~01923f"});
            }
            let counts: StreamEvent = serde_json::from_value(counts).expect("a stream event");
            assert!(processor::users_in(&counts).is_empty(), "{stream}: page counts name no user");
        }

        // An EventBridge scheduled event: no Records, so the processor sweeps.
        let v = filled(schedule, &values);
        assert_eq!((&v["source"], &v["detail-type"]), (&json!("aws.events"), &json!("Scheduled Event")), "{schedule}");
        assert!(v.get("Records").is_none(), "{schedule}");
    }
}

/// The DynamoDB actions a handler took, against its function's policies, both ways.
pub(crate) fn within_policy(id: &str, needed: &BTreeSet<Permission>) {
    let granted = allowed(&template(), id);
    let missing: Vec<&Permission> = needed.difference(&granted).collect();
    assert!(missing.is_empty(), "{id} needs {missing:?}, which template.yaml does not grant");
    let unused: Vec<&Permission> = granted.difference(needed).collect();
    assert!(unused.is_empty(), "{id}: template.yaml grants {unused:?}, which its events do not use (least privilege)");
}

#[tokio::test]
async fn processor_finishes_a_stored_batch_from_its_stream_event_within_its_policy() {
    let f = event_function("ProcessorFunction");
    let mut fx = Fixture::new().await;
    // Geofence events on for the user, a fence where the history ends, an endpoint for them.
    fx.ok("users-update", V1(200)).await;
    fx.setup(Setup::Fence).await;
    fx.setup(Setup::Webhook).await;

    // The batch of events/locations-ingest.json, stored as ingest stores it, by a request that
    // ended before its own processing (a crash, a timeout): work the stream's record announces.
    let p = fx.caller();
    let store = fx.state.store.clone();
    let ingest: Value = serde_json::from_str(&event_text("locations-ingest")).expect("event");
    let body: Value = serde_json::from_str(ingest["body"].as_str().expect("body")).expect("body");
    let batch: Vec<Location> = serde_json::from_value(body["locations"].clone()).expect("locations");
    let prepared = locations::prepare(&p, &fx.user_id, batch);
    // By the request whose id API Gateway gave it (the HTTP edge's scope).
    let request = "c6af9ac6-7b61-11e6-9a41-93e8deadbeef";
    let stored = shared::request_id::scope(request.to_owned(), async {
        let pending =
            shared::pipeline::marks::mark_batch(store.as_ref(), &p, &fx.user_id, &prepared).await.expect("batch mark");
        let stored = locations::store_prepared(store.as_ref(), &p, &fx.user_id, prepared).await.expect("store");
        shared::pipeline::marks::batch_stored(store.as_ref(), pending, &stored)
            .await
            .expect("batch stored")
            .durable()
            .await
            .expect("synced");
        stored
    })
    .await;
    assert_eq!(stored.len(), 3);
    let events = fx.ok("geofences-events-list", V1(200)).await;
    assert_eq!(events["data"]["events"], json!([]), "nothing is derived yet: {events}");
    fx.store.take();

    let webhook = fx.webhook_id.clone().expect("webhook");
    let values = [("REPLACE_PROJECT_ID", p.project_id.as_str()), ("REPLACE_USER_ID", fx.user_id.as_str())];
    let stream = filled(f.events[0], &values);
    let out = processor::process(store.as_ref(), stream.clone()).await.expect("processor");
    assert_eq!(out, json!({"processed_users": 1, "batchItemFailures": []}));
    let mut needed = fx.store.take();

    // The entry into the fence, and its webhook message waiting for the sender: queued, not in
    // the delivery log, which the sender writes when it takes a delivery up.
    let events = fx.ok("geofences-events-list", V1(200)).await;
    let list = events["data"]["events"].as_array().expect("events").clone();
    assert_eq!(list.len(), 1, "{events}");
    assert_eq!(list[0]["event_type"], "motion:geofence:entry", "{events}");
    let deliveries = fx.ok("webhooks-deliveries", V1(200)).await;
    assert_eq!(deliveries["data"]["deliveries"], json!([]), "{deliveries}");
    assert_eq!(deliveries["data"]["webhook_id"], webhook.as_str());
    let queued = store.scan_all(Table::Main).await.expect("scan");
    let pending = format!("{}#WP#{webhook}#", p.project_id);
    let queued = queued.iter().filter(|i| i["pk"].as_str().is_some_and(|pk| pk.starts_with(&pending)));
    let queued: Vec<&str> = queued.filter_map(|i| i["event_id"].as_str()).collect();
    assert_eq!(queued, [list[0]["id"].as_str().unwrap()], "its pending delivery");
    // The message names the request that stored the batch, though the pass ran in another
    // function: the sender logs it with every attempt.
    let messages = store.scan_all(Table::Main).await.expect("scan");
    let message = messages.iter().find(|i| i.get("id") == Some(&list[0]["id"]) && i.contains_key("body"));
    assert_eq!(message.and_then(|m| m.get("request_id")), Some(&json!(request)), "{message:?}");

    // A redelivered batch (retries, bisection) adds nothing; the schedule finds no work left.
    fx.store.take();
    assert_eq!(
        processor::process(store.as_ref(), stream).await.expect("again"),
        json!({"processed_users": 1, "batchItemFailures": []})
    );
    let swept = processor::process(store.as_ref(), filled(f.events[1], &values)).await.expect("sweep");
    assert_eq!(swept, json!({"swept_users": 0, "erased_users": 0, "expired_items": 0}));
    needed.extend(fx.store.take());
    let events = fx.ok("geofences-events-list", V1(200)).await;
    assert_eq!(events["data"]["events"].as_array().map(Vec::len), Some(1), "{events}");

    // Retention set (events/settings-update.json: 400 days; the batch is from 2024): the
    // schedule's retention sweep removes the three fixes, which carry no TTL attribute (stored
    // before the setting), the event's three copies, its webhook message with its delivery and
    // pending entry, and the messages of the other events (kept for streams' resume).
    fx.ok("settings-update", V1(200)).await;
    fx.store.take();
    let swept = processor::process(store.as_ref(), filled(f.events[1], &values)).await.expect("retention sweep");
    assert_eq!(swept, json!({"swept_users": 0, "erased_users": 0, "expired_items": 12}));
    needed.extend(fx.store.take());
    let events = fx.ok("geofences-events-list", V1(200)).await;
    assert_eq!(events["data"]["events"], json!([]), "{events}");
    // An erasure whose DELETE ran out of time (here at once, so it answered 202): the schedule
    // finishes it, deleting the user's history and derived items, and their v1/v3 trip (counted
    // out of the project's trip list: `UpdateItem`).
    let new_trip = shared::domain::trips::NewTrip { user_id: Some(fx.user_id.clone()), ..Default::default() };
    shared::domain::trips::create(store.as_ref(), &p, shared::domain::trips::Api::V1, new_trip).await.expect("trip");
    let started = erasure::erase(store.as_ref(), &p, &fx.user_id, std::time::Instant::now()).await.expect("erase");
    assert!(!started.complete);
    fx.store.take();
    let swept = processor::process(store.as_ref(), filled(f.events[1], &values)).await.expect("erasure sweep");
    assert_eq!(swept, json!({"swept_users": 0, "erased_users": 1, "expired_items": 0}));
    needed.extend(fx.store.take());
    assert!(!erasure::in_progress(store.as_ref(), &p.project_id, &fx.user_id).await.expect("marker"));

    within_policy(f.id, &needed);
}

/// What a receiver got: the headers and body of each request.
type Received = Arc<Mutex<Vec<(HeaderMap, Bytes)>>>;

/// A webhook receiver on loopback that answers 204; its URL.
async fn receiver() -> (String, Received) {
    let got: Received = Arc::default();
    let keep = got.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: HeaderMap, body: Bytes| {
            let keep = keep.clone();
            async move {
                keep.lock().expect("received").push((headers, body));
                StatusCode::NO_CONTENT
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });
    (format!("http://{addr}/hook"), got)
}

#[tokio::test]
async fn webhook_sender_delivers_signed_messages_within_its_policy() {
    let f = event_function("WebhookSenderFunction");
    let mut fx = Fixture::new().await;
    let created = fx.ok("webhooks-create", V1(201)).await;
    let webhook = created["data"]["webhook_id"].as_str().expect("webhook_id").to_owned();
    let secret = created["data"]["secret"].as_str().expect("secret").to_owned();
    fx.webhook_id = Some(webhook.clone());
    // The API refuses loopback URLs (unless WAYMARK_WEBHOOK_ALLOW_PRIVATE=1, process-wide): point
    // the endpoint at the receiver in the store, as an update would.
    let (url, received) = receiver().await;
    webhooks::modify(fx.state.store.as_ref(), &fx.caller(), &webhook, |e| {
        e.url = url.clone();
        Ok(())
    })
    .await
    .expect("point the endpoint at the receiver");
    let queued = fx.ok("webhooks-test", V1(201)).await;
    let event_id = queued["data"]["event_id"].as_str().expect("event_id").to_owned();
    fx.store.take();

    // The schedule's event: one pass over every endpoint with work.
    let cfg = deliver::DeliveryConfig {
        schedule: vec![Duration::from_secs(60)],
        timeout: Duration::from_secs(5),
        disable_after: Duration::from_secs(deliver::DEFAULT_DISABLE_AFTER_SECONDS),
        allow_private: true,
    };
    let worker = deliver::Worker::new(fx.state.store.clone(), cfg).expect("worker");
    let schedule: Value = serde_json::from_str(&event_text("schedule")).expect("schedule event");
    assert_eq!(processor::send(&worker, &schedule).await.expect("send"), json!({"next_attempt_at": null}));
    // The next pass finds nothing pending and removes the endpoint's work mark.
    assert_eq!(processor::send(&worker, &schedule).await.expect("send"), json!({"next_attempt_at": null}));
    let needed = fx.store.take();

    let got = received.lock().expect("received").clone();
    assert_eq!(got.len(), 1, "one delivery of the test event");
    let (headers, body) = &got[0];
    standardwebhooks::Webhook::new(&secret)
        .expect("secret")
        .verify(body, headers)
        .unwrap_or_else(|e| panic!("signature does not verify: {e:?}"));
    assert_eq!(headers["webhook-id"], event_id.as_str());
    let msg: Value = serde_json::from_slice(body).expect("JSON body");
    assert_eq!((&msg["id"], &msg["type"]), (&json!(event_id), &json!("webhook.test")), "{msg}");
    assert_eq!(msg["project_id"], fx.project.project_id.as_str(), "{msg}");
    let pending = fx.ok("webhooks-deliveries", V1(200)).await;
    assert_eq!(pending["data"]["deliveries"], json!([]), "nothing left pending: {pending}");

    within_policy(f.id, &needed);
}

#[tokio::test]
async fn webhook_sender_reads_only_the_work_shards_a_stream_batch_names() {
    let fx = Fixture::new().await;
    let cfg = deliver::DeliveryConfig {
        schedule: vec![Duration::from_secs(60)],
        timeout: Duration::from_secs(5),
        disable_after: Duration::from_secs(deliver::DEFAULT_DISABLE_AFTER_SECONDS),
        allow_private: true,
    };
    let worker = deliver::Worker::new(fx.state.store.clone(), cfg).expect("worker");
    fx.store.actions();
    // An empty batch (a cold start's first event can be one): answered without a DynamoDB call.
    let empty = json!({"Records": []});
    assert_eq!(
        processor::send(&worker, &empty).await.expect("send"),
        json!({"next_attempt_at": null, "batchItemFailures": []})
    );
    assert_eq!(fx.store.actions(), 0, "DynamoDB actions for an empty stream batch");
    // A batch that wrote one work mark: that shard's marks are read, no other shard's.
    let one: Value = serde_json::from_str(&event_text("webhook-sender-work-stream")).expect("stream event");
    processor::send(&worker, &one).await.expect("send");
    assert_eq!(fx.store.actions(), 1, "one Query of WORK#3");
    // The schedule reads every shard (retries coming due are found there).
    let schedule: Value = serde_json::from_str(&event_text("schedule")).expect("schedule event");
    processor::send(&worker, &schedule).await.expect("send");
    assert_eq!(fx.store.actions(), webhooks::outbox::WORK_SHARDS as usize);
}

#[tokio::test]
async fn a_stream_batch_reports_the_failed_user_alone() {
    // A record of a project that does not exist (its pass fails) beside the fixture's user:
    // the answer names the failed record's sequence number (`ReportBatchItemFailures`), and the
    // other user's pass is done, so Lambda retries only from the failed record.
    let f = event_function("ProcessorFunction");
    let fx = Fixture::new().await;
    let p = fx.caller();
    let values = [("REPLACE_PROJECT_ID", p.project_id.as_str()), ("REPLACE_USER_ID", fx.user_id.as_str())];
    let mut stream = filled(f.events[0], &values);
    let records = stream["Records"].as_array_mut().expect("Records");
    let mut bad = records[0].clone();
    bad["dynamodb"]["Keys"]["pk"] = json!({"S": "000000000000000000000000#000000000000000000000001"});
    bad["dynamodb"]["SequenceNumber"] = json!("999000000000000000000001");
    records.push(bad);
    let out = processor::process(fx.state.store.as_ref(), stream).await.expect("processor");
    assert_eq!(
        out,
        json!({"processed_users": 1, "batchItemFailures": [{"itemIdentifier": "999000000000000000000001"}]})
    );
}
