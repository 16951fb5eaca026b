//! Races between concurrent moves of one trip: exactly one start wins, every update lands with
//! its event, a pause and an end leave consistent flags.

use super::*;

both!(concurrent_starts_let_exactly_one_win, |app| async move {
    for ver in VERSIONS {
        let (id, _) = trip_with_user(&app, ver).await;
        let results =
            join_all((0..8).map(|_| control(&app, ver, json!({"trip_id": id.clone(), "action": "start"})))).await;
        let wins = results.iter().filter(|(s, _)| *s == StatusCode::OK).count();
        assert_eq!(wins, 1, "{results:?}");
        for (status, res) in results.iter().filter(|(s, _)| *s != StatusCode::OK) {
            assert_error(*status, res, StatusCode::CONFLICT, "started");
        }
        let got = get_trip(&app, ver, &id).await;
        assert_eq!(got["is_started"], true);
        assert_eq!(events(&got, "trip:started").len(), 1, "{got}");
        assert_eq!(got["events"].as_array().unwrap().len(), 2, "{got}");
    }
});

both!(concurrent_updates_all_land_with_one_event_each, |app| async move {
    for ver in VERSIONS {
        let (id, _) = trip_with_user(&app, ver).await;
        let bodies: Vec<Value> =
            (0..6u8).map(|i| json!({"trip_id": id, "destinations": [[10.0 + f64::from(i), 20.0]]})).collect();
        let results = join_all(bodies.iter().map(|b| update(&app, ver, b.clone()))).await;
        for (i, (status, res)) in results.iter().enumerate() {
            assert_eq!(*status, StatusCode::CREATED, "{res}");
            // Each response shows the trip as its own update left it.
            assert_eq!(
                res["data"][0]["destinations"][0]["coordinates"]["coordinates"],
                json!([10.0 + i as f64, 20.0]),
                "{res}"
            );
        }
        let got = get_trip(&app, ver, &id).await;
        assert_eq!(events(&got, "motion:trip:created").len(), 6, "{got}");
        assert_eq!(got["events"].as_array().unwrap().len(), 7, "{got}");
        let dest = got["destinations"].as_array().unwrap();
        assert_eq!(dest.len(), 1, "replacements do not pile up: {got}");
        let lng = dest[0]["coordinates"]["coordinates"][0].as_f64().unwrap();
        assert!((10.0..16.0).contains(&lng) && lng.fract() == 0.0, "{lng}");
        // The event ids are distinct.
        let mut ev: Vec<&str> = got["events"].as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap()).collect();
        ev.sort();
        ev.dedup();
        assert_eq!(ev.len(), 7);
    }
});

both!(concurrent_pause_and_end_leave_consistent_flags, |app| async move {
    for ver in VERSIONS {
        for round in 0..6 {
            let (id, _) = trip_with_user(&app, ver).await;
            control_ok(&app, ver, &id, "start", json!({"started_at": ts(Utc::now() - Duration::minutes(5))})).await;
            let pause = control(&app, ver, json!({"trip_id": id, "action": "pause"}));
            let end = control(&app, ver, json!({"trip_id": id, "action": "end"}));
            // Both orders of first poll: neither request gives a time, so neither may be refused
            // for a time before the other's.
            let ((ps, pr), (es, er)) = if round % 2 == 0 {
                futures::join!(pause, end)
            } else {
                let (e, p) = futures::join!(end, pause);
                (p, e)
            };
            for res in [&pr, &er].into_iter().filter(|r| r["status"] == true) {
                let t = &res["data"][0];
                assert!(!(t["is_paused"] == true && t["is_ended"] == true), "{t}");
            }
            let first = if round % 2 == 0 { "pause" } else { "end" };
            assert_eq!(
                es,
                StatusCode::OK,
                "{ver}, {first} polled first: an end without ended_at is legal from started and from \
                 paused, and must not be refused for a time before a concurrent pause's: \
                 pause -> {ps} (is_paused {}); end -> {er}",
                pr["data"][0]["is_paused"]
            );
            if ps != StatusCode::OK {
                assert_error(ps, &pr, StatusCode::CONFLICT, "ended");
            }
            let got = get_trip(&app, ver, &id).await;
            assert_eq!((got["is_paused"].clone(), got["is_ended"].clone()), (json!(false), json!(true)), "{got}");
            assert!(got["duration"].is_number(), "{got}");
            assert_eq!(events(&got, "trip:completed").len(), 1);
        }
    }
});
