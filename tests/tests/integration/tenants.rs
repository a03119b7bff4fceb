//! Tenants and policies: round trips, conflicts, concurrency, audit.

use pinfold_tests::*;
use serde_json::json;

#[tokio::test]
async fn create_and_read_a_tenant() {
    let app = TestApp::new().await;
    let r = app
        .send(
            "POST",
            "/v1/tenants",
            Some(&app.platform()),
            Some(json!({"id": "acme-corp", "name": "Acme Corp"})),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.json());
    assert_eq!(
        r.header("location").as_deref(),
        Some("/v1/tenants/acme-corp")
    );
    let created = r.json();
    assert_eq!(created["id"], "acme-corp");
    assert_eq!(created["created_by"], "platform-op");
    // New tenants default to permissive with approval required.
    assert_eq!(created["policy"]["enforcement_mode"], "permissive");
    assert_eq!(created["policy"]["approval_required"], true);
    assert_eq!(created["policy"]["revision"], 1);
    let t = token("a", Some("acme-corp"), &["reader"]);
    let got = app.get("/v1/tenants/acme-corp", &t).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.json(), created);
    // The platform token that created it holds nothing inside it: the
    // tenant is read with a token of its own.
    app.get("/v1/tenants/acme-corp", &app.platform())
        .await
        .problem(404, "tenant_not_found");
}

#[tokio::test]
async fn a_taken_id_is_409_and_bad_ids_are_422() {
    let app = TestApp::new().await;
    let r = app
        .send(
            "POST",
            "/v1/tenants",
            Some(&app.platform()),
            Some(json!({"id": app.tenant.as_str(), "name": "Again"})),
        )
        .await;
    r.problem(409, "tenant_exists");
    for bad in ["A", "-lead", "has_underscore", "x", &"a".repeat(64)] {
        let r = app
            .send(
                "POST",
                "/v1/tenants",
                Some(&app.platform()),
                Some(json!({"id": bad, "name": "X"})),
            )
            .await;
        let body = r.problem(422, "validation_failed");
        assert_eq!(body["errors"][0]["pointer"], "/id", "{bad}");
    }
    // All errors at once.
    let r = app
        .send(
            "POST",
            "/v1/tenants",
            Some(&app.platform()),
            Some(json!({"id": "BAD", "name": ""})),
        )
        .await;
    let body = r.problem(422, "validation_failed");
    let pointers: Vec<&str> = body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["pointer"].as_str().unwrap())
        .collect();
    assert_eq!(pointers, ["/id", "/name"]);
    // The failed attempts left the original untouched.
    let t = app.admin();
    assert_eq!(
        app.get(&format!("/v1/tenants/{}", app.tenant), &t)
            .await
            .json()["name"],
        "Test tenant"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_creates_of_one_id_have_exactly_one_winner() {
    let app = std::sync::Arc::new(TestApp::new().await);
    let id = format!("race-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    // The writers start together, on several worker threads.
    let start = std::sync::Arc::new(tokio::sync::Barrier::new(12));
    let mut tasks = Vec::new();
    for i in 0..12 {
        let app = app.clone();
        let id = id.clone();
        let start = start.clone();
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            let r = app
                .send(
                    "POST",
                    "/v1/tenants",
                    Some(&app.platform()),
                    Some(json!({"id": id, "name": format!("n{i}")})),
                )
                .await;
            (r.status.as_u16(), i)
        }));
    }
    let mut created = Vec::new();
    let mut conflicts = 0;
    for t in tasks {
        match t.await.unwrap() {
            (201, i) => created.push(i),
            (409, _) => conflicts += 1,
            (s, _) => panic!("unexpected status {s}"),
        }
    }
    assert_eq!(created.len(), 1);
    assert_eq!(conflicts, 11);
    let t = token("a", Some(&id), &["reader"]);
    let stored = app.get(&format!("/v1/tenants/{id}"), &t).await.json();
    assert_eq!(
        stored["name"],
        format!("n{}", created[0]),
        "the winner's data is stored"
    );
}

#[tokio::test]
async fn policy_round_trip_with_overrides() {
    let app = TestApp::new().await;
    let t = app.admin();
    let path = format!("/v1/tenants/{}/policy", app.tenant);
    let r = app.get(&path, &t).await;
    assert_eq!(r.header("etag").as_deref(), Some("\"r1\""));
    let policy = json!({
        "enforcement_mode": "strict",
        "approval_required": false,
        "overrides": {"servers": {"io.github.acme/files": {
            "enforcement_mode": "advisory",
            "tools": {"delete_file": {"destructiveHint": true}}
        }}}
    });
    let r = app.send("PUT", &path, Some(&t), Some(policy.clone())).await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    assert_eq!(r.header("etag").as_deref(), Some("\"r2\""));
    let got = app.get(&path, &t).await.json();
    assert_eq!(got["enforcement_mode"], "strict");
    assert_eq!(got["approval_required"], false);
    assert_eq!(got["overrides"], policy["overrides"]);
    assert_eq!(got["revision"], 2);
    assert_eq!(got["updated_by"], "alice-admin");
    // Unknown modes and server names are refused with pointers.
    let r = app
        .send(
            "PUT",
            &path,
            Some(&t),
            Some(json!({"enforcement_mode": "lenient", "approval_required": true})),
        )
        .await;
    let body = r.problem(422, "validation_failed");
    assert_eq!(body["errors"][0]["pointer"], "/enforcement_mode");
    let r = app
        .send(
            "PUT",
            &path,
            Some(&t),
            Some(json!({"enforcement_mode": "strict", "approval_required": true,
                "overrides": {"servers": {"no-slash": {}, "io.x/y": {"tools": {"bad name!": {}}}}}})),
        )
        .await;
    let body = r.problem(422, "validation_failed");
    let pointers: Vec<&str> = body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["pointer"].as_str().unwrap())
        .collect();
    assert_eq!(
        pointers,
        [
            "/overrides/servers/io.x~1y/tools/bad name!",
            "/overrides/servers/no-slash"
        ]
    );
    assert_eq!(
        app.get(&path, &t).await.json()["revision"],
        2,
        "refused writes change nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn if_match_guards_against_lost_updates() {
    let app = std::sync::Arc::new(TestApp::new().await);
    let t = app.admin();
    let path = format!("/v1/tenants/{}/policy", app.tenant);
    let body = json!({"enforcement_mode": "advisory", "approval_required": true});
    let r = app
        .send_raw(
            "PUT",
            &path,
            Some(&t),
            Some(body.to_string().as_bytes()),
            &[("if-match", "\"r7\"")],
        )
        .await;
    let p = r.problem(412, "precondition_failed");
    assert_eq!(p["current_revision"], 1);
    // Writers who all read r1, starting together: exactly one wins.
    let modes = [
        "strict", "advisory", "strict", "advisory", "strict", "advisory",
    ];
    let start = std::sync::Arc::new(tokio::sync::Barrier::new(modes.len()));
    let mut tasks = Vec::new();
    for mode in modes {
        let app = app.clone();
        let t = t.clone();
        let path = path.clone();
        let start = start.clone();
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            let b = json!({"enforcement_mode": mode, "approval_required": false}).to_string();
            app.send_raw(
                "PUT",
                &path,
                Some(&t),
                Some(b.as_bytes()),
                &[("if-match", "\"r1\"")],
            )
            .await
            .status
            .as_u16()
        }));
    }
    let mut statuses = Vec::new();
    for t in tasks {
        statuses.push(t.await.unwrap());
    }
    statuses.sort();
    assert_eq!(statuses, [200, 412, 412, 412, 412, 412]);
    assert_eq!(app.get(&path, &t).await.json()["revision"], 2);
    let r = app
        .send_raw(
            "PUT",
            &path,
            Some(&t),
            Some(body.to_string().as_bytes()),
            &[("if-match", "garbage")],
        )
        .await;
    r.problem(412, "precondition_failed");
}

#[tokio::test]
async fn audit_log_records_changes_in_order_with_pagination() {
    let app = TestApp::new().await;
    let t = app.admin();
    let path = format!("/v1/tenants/{}/policy", app.tenant);
    for mode in ["strict", "advisory", "permissive"] {
        let r = app
            .send(
                "PUT",
                &path,
                Some(&t),
                Some(json!({"enforcement_mode": mode, "approval_required": true})),
            )
            .await;
        assert_eq!(r.status, 200);
    }
    let audit = format!("/v1/tenants/{}/audit", app.tenant);
    let all = app.get(&audit, &t).await.json();
    let kinds: Vec<&str> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "tenant.created",
            "policy.updated",
            "policy.updated",
            "policy.updated"
        ]
    );
    assert_eq!(
        all["items"][1]["data"]["policy"]["enforcement_mode"],
        "strict"
    );
    assert_eq!(all["items"][3]["actor"], "alice-admin");
    assert!(all["next_cursor"].is_null());
    let ids: Vec<i64> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_i64().unwrap())
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    // Paginate two at a time.
    let p1 = app.get(&format!("{audit}?limit=2"), &t).await.json();
    assert_eq!(p1["items"].as_array().unwrap().len(), 2);
    let cursor = p1["next_cursor"].as_str().unwrap();
    let p2 = app
        .get(&format!("{audit}?limit=2&cursor={cursor}"), &t)
        .await
        .json();
    assert_eq!(p2["items"][0]["id"], all["items"][2]["id"]);
    assert!(p2["next_cursor"].is_null());
    // Filter by kind.
    let f = app
        .get(&format!("{audit}?kind=tenant.created"), &t)
        .await
        .json();
    assert_eq!(f["items"].as_array().unwrap().len(), 1);
    // Bad paging input is a 422 problem.
    app.get(&format!("{audit}?limit=0"), &t)
        .await
        .problem(422, "validation_failed");
    app.get(&format!("{audit}?limit=101"), &t)
        .await
        .problem(422, "validation_failed");
    app.get(&format!("{audit}?cursor=%%%"), &t)
        .await
        .problem(422, "validation_failed");
    app.get(&format!("{audit}?limit=abc"), &t)
        .await
        .problem(400, "bad_request");
    app.get(&format!("{audit}?cursor=bm90LWEtbnVtYmVy"), &t)
        .await
        .problem(422, "validation_failed");
    // Readers cannot read the audit log.
    app.get(&audit, &app.as_roles("r", &["reader"]))
        .await
        .problem(403, "forbidden_role");
}
