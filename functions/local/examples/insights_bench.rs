//! Time and DynamoDB capacity to answer each insight endpoint for a user with a year of history
//! at one location a minute. Run in release, with DynamoDB Local for the capacity part:
//! `source scripts/dynamodb-local.sh; cargo run --release -p local --example insights_bench`.
//!
//! The year is ingested on the in-memory embedded store (through the real ingest path, which
//! detects stays and keeps the places aggregate); what the insights read (the user, the stays, the
//! run in progress and the aggregate) is then copied to DynamoDB Local, where each endpoint's
//! consumed capacity is measured. Each endpoint is answered two ways: from the aggregate (what
//! the service does) and by clustering every stay (the reference, and the cost before it).
#![allow(clippy::disallowed_methods)] // tests and tools read their own settings from the environment

#[path = "../../../tests/api/insights_oracle.rs"]
mod insights_oracle;

use std::time::Instant;

use chrono::{Duration, NaiveDate, Timelike};
use shared::domain::insights::{self, Kind, aggregate};
use shared::domain::locations::{Location, prepare, store_prepared};
use shared::domain::projects::{self, ChosenKeys};
use shared::domain::users;
use shared::project::{KeyKind, Project};
use shared::store::{DynamoStore, EmbeddedStore, Query, SkRange, Store, Table, TableNames};

/// (hour from, hour to, lng, lat) of a weekday and of a weekend day; travel elsewhere.
fn place_at(day: NaiveDate, hour: f64) -> Option<(f64, f64)> {
    use chrono::Datelike;
    let (home, office, gym) = ((13.405, 52.52), (13.3777, 52.5163), (13.42, 52.53));
    let weekend = day.weekday().number_from_monday() > 5;
    match hour {
        h if h < 7.5 => Some(home),
        h if weekend && (10.5..12.0).contains(&h) && day.weekday().number_from_monday() == 6 => Some((13.395, 52.525)),
        h if weekend => (h >= 7.5).then_some(home),
        h if (8.0..17.5).contains(&h) => Some(office),
        h if (18.0..19.0).contains(&h) && day.weekday().number_from_monday() % 2 == 1 => Some(gym),
        h if h >= 19.5 => Some(home),
        _ => None,
    }
}

#[tokio::main]
async fn main() {
    let store = EmbeddedStore::memory().expect("store");
    let issued = projects::create(&store, "bench", &ChosenKeys::default()).await.expect("project");
    let p = Project { project_id: issued.project_id, account_id: issued.account_id, kind: KeyKind::Secret };
    let body = serde_json::from_value(serde_json::json!({"app_type": 1, "device_token": "t"})).expect("body");
    let user = users::create(&store, &p, body).await.expect("user");

    let start = NaiveDate::from_ymd_opt(2024, 1, 1).expect("date").and_hms_opt(0, 0, 0).expect("time");
    let minutes = 365 * 24 * 60;
    let t_ingest = Instant::now();
    let mut batch = Vec::with_capacity(1000);
    for m in 0..minutes {
        let local = start + Duration::minutes(m);
        let hour = local.hour() as f64 + local.minute() as f64 / 60.0;
        let (lng, lat) =
            place_at(local.date(), hour).unwrap_or((13.39 + (m % 97) as f64 * 1e-4, 52.51 + (m % 89) as f64 * 1e-4));
        let jitter = ((m as f64 * 12.9898).sin() * 43_758.545).fract() * 8e-5;
        let at = (local - Duration::hours(1)).and_utc();
        let fix: Location = serde_json::from_value(serde_json::json!({
            "coordinates": [lng + jitter, lat - jitter], "recorded_at": at.format("%Y-%m-%dT%H:%M:%S").to_string(),
            "accuracy": 10.0, "timezone_offset": "+0100",
        }))
        .expect("fix");
        batch.push(fix);
        if batch.len() == 1000 || m + 1 == minutes {
            let _stored = store_prepared(&store, &p, &user.id, prepare(&p, &user.id, std::mem::take(&mut batch)))
                .await
                .expect("ingest");
            shared::pipeline::processor::process_user(&store, &p, &user.id).await.expect("hook");
        }
    }
    println!("ingested {minutes} locations (one a minute for a year) in {:.1} s", t_ingest.elapsed().as_secs_f64());

    let stays_pk = format!("{}#ST#{}", p.project_id, user.id);
    let stays = store.query(Table::Main, &Query::new(&stays_pk, SkRange::All)).await.expect("stays").items;
    println!("{} stays stored", stays.len());
    let agg_pk = aggregate::aggregate_pk(&p.project_id, &user.id);
    let agg = store.get(Table::Main, &agg_pk, "-").await.expect("aggregate").expect("kept by the processor");
    println!(
        "places aggregate: {} bytes as JSON, {} places",
        serde_json::to_vec(&agg).expect("json").len(),
        agg.get("places").and_then(|v| v.as_array()).map_or(0, Vec::len)
    );
    for (kind, name) in KINDS {
        for (how, legacy) in [("aggregate", false), ("all stays", true)] {
            let (ms, n) = timed(9, || answer(&store, &p, &user.id, kind, legacy)).await;
            println!("embedded  /v3/api/insights/{name}/ from {how}: median {ms}, {n} result(s)");
        }
    }

    if std::env::var_os("AWS_ENDPOINT_URL_DYNAMODB").is_none() {
        println!("(AWS_ENDPOINT_URL_DYNAMODB not set: DynamoDB capacity not measured)");
        return;
    }
    let dynamo = DynamoStore::from_env(TableNames::with_prefix(&format!("bench-{}-", std::process::id()))).await;
    dynamo.ensure_tables().await.expect("tables");
    // What the insights read: the user, the stays, the run in progress and the aggregate.
    let run_pk = format!("{}#SS#{}", p.project_id, user.id);
    let user_item = store.get(Table::Main, &users::users_pk(&p.project_id), &user.id).await.expect("user");
    let run = store.get(Table::Main, &run_pk, "-").await.expect("run");
    for item in stays.into_iter().chain(run).chain(Some(agg)).chain(user_item) {
        dynamo.put(Table::Main, item, shared::store::Cond::None).await.expect("copy");
    }
    for (kind, name) in KINDS {
        for (how, legacy, runs) in [("aggregate", false, 9), ("all stays", true, 3)] {
            let before = dynamo.consumed_capacity();
            let (ms, n) = timed(runs, || answer(&dynamo, &p, &user.id, kind, legacy)).await;
            let rcu = (dynamo.consumed_capacity() - before) / runs as f64;
            println!(
                "dynamodb  /v3/api/insights/{name}/ from {how}: median {ms}, {rcu:.1} read capacity units, {n} result(s)"
            );
        }
    }
}

const KINDS: [(Kind, &str); 3] = [(Kind::Home, "home"), (Kind::Work, "work"), (Kind::Poi, "poi")];

/// One request's store work: the user read (as the handler does), then the insights.
async fn answer(store: &dyn Store, p: &Project, user_id: &str, kind: Kind, legacy: bool) -> usize {
    users::get(store, p, user_id).await.expect("user").expect("the user");
    if legacy {
        insights_oracle::insights_from_stays(store, p, user_id, kind).await.len()
    } else {
        insights::insights(store, p, user_id, kind).await.expect("insights").len()
    }
}

/// Median (min-max) of `runs` timings in ms, and the result count.
async fn timed<F: std::future::Future<Output = usize>>(runs: usize, mut f: impl FnMut() -> F) -> (String, usize) {
    let (mut times, mut n) = (Vec::new(), 0);
    for _ in 0..runs {
        let t = Instant::now();
        n = f().await;
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    (format!("{:.1} ms ({:.1}-{:.1})", times[runs / 2], times[0], times[runs - 1]), n)
}
