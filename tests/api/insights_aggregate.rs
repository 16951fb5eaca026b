//! Insights answered from the maintained per-user places aggregate, on both backends: the answer
//! equals one computed from scratch (an aggregate built from every stored stay, the stay in
//! progress included) however the fixes arrive (late and re-sent batches, two at once, a stay that
//! grows between requests); two writers of one aggregate cannot both win.

use axum::http::StatusCode;
use chrono::NaiveDate;
use serde_json::{Value, json};
use shared::domain::insights::aggregate::{self, Aggregate};
use shared::domain::insights::{self, Kind};
use shared::project::{KeyKind, Project};
use shared::store::{Cond, StoreError, Table, from_item, to_item};

use crate::both;
use crate::helpers::{Key, TestApp};
use crate::insights::insights as get_insights;
use crate::insights_life::{HOME, NEW_HOME, OFFICE, commuter, monday};
use crate::life::{MATCH_M, Sampling, centre, live};
use crate::trace::geodesic;

fn project(app: &TestApp) -> Project {
    Project {
        project_id: app.project.project_id.clone(),
        account_id: app.project.account_id.clone(),
        kind: KeyKind::Secret,
    }
}

/// An answer without `created_at` (the time of the request).
fn stable(mut list: Vec<Value>) -> Vec<Value> {
    for i in &mut list {
        i.as_object_mut().expect("an insight").remove("created_at");
    }
    list
}

async fn post(app: &TestApp, user: &str, batch: &[Value]) {
    let (s, r) = app
        .call("POST", "/v1/api/location/", Key::Publishable, Some(&json!({"user_id": user, "locations": batch})))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
}

/// The answers of the API (from the aggregate) equal those of an aggregate built from all
/// stays; returns them, with the from-scratch clustering of all stays beside, for the caller.
async fn same_as_from_scratch(app: &TestApp, user: &str, when: &str) -> Vec<(Vec<Value>, Vec<Value>)> {
    let p = project(app);
    let store = app.state.store.as_ref();
    let mut stays = insights::stays(store, &p, user).await.expect("stays");
    stays.sort_by(|a, b| a.id.cmp(&b.id));
    let mut rebuilt = Aggregate::default();
    for s in &stays {
        rebuilt.fold(s);
    }
    let rebuilt = rebuilt.places();
    let mut out = Vec::new();
    for (kind, name) in [(Kind::Home, "home"), (Kind::Work, "work"), (Kind::Poi, "poi")] {
        let got = stable(get_insights(app, name, user).await);
        assert_eq!(got, stable(insights::answer(&rebuilt, kind)), "{name} {when}");
        out.push((got, stable(crate::insights_oracle::insights_from_stays(store, &p, user, kind).await)));
    }
    out
}

/// Home, work and POIs are the places that clustering every stay finds (centres within a few
/// meters), so the aggregate answers what the full clustering answered.
#[track_caller]
fn same_places(answers: &[(Vec<Value>, Vec<Value>)]) {
    for (got, full) in answers {
        assert_eq!(got.len(), full.len(), "{got:?}\n{full:?}");
        for g in got {
            let d = full.iter().map(|f| geodesic(centre(g), centre(f))).fold(f64::MAX, f64::min);
            assert!(d < MATCH_M / 2.0, "{d:.0} m from the full clustering's: {g}");
        }
    }
}

both!(the_maintained_aggregate_answers_as_one_built_from_every_stay, |app| async move {
    // Six weeks, then a move: fixes in batches of 300, some late (a batch sent after the next
    // one), one sent twice, two sent at once; compared while the stay in progress grows.
    let moved_on = |d: NaiveDate, i: i64| commuter(d, if i >= 42 { NEW_HOME } else { HOME }, Some(OFFICE));
    let fixes = live(monday(), 42 + 12, "Europe/Berlin", Sampling::Every(600), 11, moved_on);
    let batches: Vec<&[Value]> = fixes.chunks(300).collect();
    let u = app.create_user(json!({})).await;
    let mut i = 0;
    while i < batches.len() {
        match i % 7 {
            // Late: the next batch first, then this one (its fixes older than the watermark).
            2 if i + 1 < batches.len() => {
                post(&app, &u, batches[i + 1]).await;
                post(&app, &u, batches[i]).await;
                i += 2;
            }
            // Two at once.
            4 if i + 1 < batches.len() => {
                tokio::join!(post(&app, &u, batches[i]), post(&app, &u, batches[i + 1]));
                i += 2;
            }
            // Sent twice.
            5 => {
                post(&app, &u, batches[i]).await;
                post(&app, &u, batches[i]).await;
                i += 1;
            }
            _ => {
                post(&app, &u, batches[i]).await;
                i += 1;
            }
        }
        if i % 6 == 0 {
            same_as_from_scratch(&app, &u, &format!("after {i} batches")).await;
        }
    }
    // Half a day more at the new home: the stay in progress grows, the answer follows it.
    let last = same_as_from_scratch(&app, &u, "at the end").await;
    same_places(&last);
    let home = &last[0].0;
    assert!(geodesic(centre(&home[0]), NEW_HOME) < 40.0, "{home:?}");
});

both!(two_writers_of_one_aggregate_cannot_both_win, |app| async move {
    let fixes = live(monday(), 3, "Europe/Berlin", Sampling::Every(600), 31, |d, _| commuter(d, HOME, Some(OFFICE)));
    let u = app.create_user(json!({})).await;
    post(&app, &u, &fixes).await;
    let p = project(&app);
    let store = app.state.store.as_ref();
    let pk = aggregate::aggregate_pk(&p.project_id, &u);
    let item = store.get(Table::Main, &pk, "-").await.expect("get").expect("an aggregate");
    let read: Aggregate = from_item(item).expect("decoded");
    // Both read version v and write v + 1 on the condition that it is still v: one wins.
    let mut next = read.clone();
    next.version += 1;
    let cond = || Cond::Equals("version", read.version.into());
    store.put(Table::Main, to_item(&pk, "-", &next).expect("item"), cond()).await.expect("the first wins");
    let second = store.put(Table::Main, to_item(&pk, "-", &next).expect("item"), cond()).await;
    assert!(matches!(second, Err(StoreError::ConditionFailed)), "{second:?}");
    // The processor redoes a pass that lost: more fixes still end in the from-scratch answer.
    let more = live(monday() + chrono::Duration::days(3), 4, "Europe/Berlin", Sampling::Every(600), 32, |d, _| {
        commuter(d, HOME, Some(OFFICE))
    });
    let (a, b) = more.split_at(more.len() / 2);
    tokio::join!(post(&app, &u, a), post(&app, &u, b));
    same_as_from_scratch(&app, &u, "after two writers").await;
});
