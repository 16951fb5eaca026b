//! Stays on the real traces of `../shared/data/trip-truth` (`insights::stays`), sampled sparsely
//! as a phone in the background is (one fix every 5 or 10 minutes on a fixed grid): how many stays
//! each sampling finds, and how many lie away from every place the vehicle or rider actually stood
//! (a full-rate fix with less than 30 m of movement over the next minute): none may, since a stay
//! where no one stood is a phantom place. `cargo test -p waymark-tests --test api
//! stays_on_real_traces -- --nocapture` prints the table.

use serde_json::json;
use shared::domain::insights::stays;
use shared::domain::locations::{self, Location};

use crate::geofences::project;
use crate::helpers::{Backend, TestApp};
use crate::trace::geodesic;
use crate::trip_truth::traces;

#[tokio::test]
async fn stays_on_real_traces() {
    let app = TestApp::new(Backend::Embedded).await;
    let p = project(&app);
    let store = app.state.store.as_ref();
    println!("| trace | every | stays | away from any standing (> 100 m) |");
    let (mut all, mut away) = (0, 0);
    for t in traces() {
        // Where it stood: a fix with under 30 m of movement over the next 60 s.
        let standing: Vec<(f64, f64)> = t
            .fixes
            .iter()
            .enumerate()
            .filter(|(i, f)| {
                let later = t.fixes[*i..].iter().find(|g| g.0 >= f.0 + 60);
                later.is_some_and(|g| geodesic((f.2, f.1), (g.2, g.1)) < 30.0)
            })
            .map(|(_, f)| (f.2, f.1))
            .collect();
        for every in [300, 600] {
            let start = t.fixes[0].0;
            let mut next = start;
            let mut sparse = Vec::new();
            for f in &t.fixes {
                if f.0 >= next {
                    let at = chrono::DateTime::from_timestamp(f.0, 0).unwrap();
                    sparse.push(
                        json!({"coordinates": [f.2, f.1], "recorded_at": shared::time::Timestamp(at).format(None),
                        "accuracy": f.4.unwrap_or(10.0)}),
                    );
                    next = f.0 - (f.0 - start) % every + every;
                }
            }
            let fixes: Vec<Location> = sparse.iter().map(|f| serde_json::from_value(f.clone()).unwrap()).collect();
            let user = app.create_user(json!({})).await;
            let prepared = locations::prepare(&p, &user, fixes);
            let plan = stays::plan(store, &p, &user, &prepared).await.expect("stays");
            let far = plan
                .closed
                .iter()
                .filter(|s| standing.iter().all(|w| geodesic(*w, (s.centre.lng, s.centre.lat)) > 100.0))
                .count();
            println!("| {} | {every} s | {} | {far} |", t.name, plan.closed.len());
            (all, away) = (all + plan.closed.len(), away + far);
        }
    }
    println!("all: {all} stays, {away} away from any standing");
    assert_eq!(away, 0, "stays where no one stood");
}
