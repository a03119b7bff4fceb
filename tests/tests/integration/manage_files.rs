//! The reference server the resolve and guard suites share: the
//! `manage-files` card of `examples/manage-files-1.0.0.json`, published and
//! approved, and the reference upstream (an rmcp server over real HTTP)
//! that serves it.

use std::sync::Arc;

use pinfold_example_upstream::{Running, Switches};
use pinfold_tests::*;
use serde_json::{Value, json};

const CARD: &str = include_str!("../../../examples/manage-files-1.0.0.json");

pub(crate) fn card() -> Value {
    serde_json::from_str(CARD).unwrap()
}

pub(crate) fn server() -> String {
    card()["name"].as_str().unwrap().to_owned()
}

pub(crate) async fn upstream(switches: Switches) -> Arc<Running> {
    Running::start("127.0.0.1:0".parse().unwrap(), switches)
        .await
        .expect("reference upstream starts")
}

/// Publishes and approves the reference card in `app`'s tenant.
pub(crate) async fn publish(app: &TestApp) {
    let base = format!(
        "/v1/tenants/{}/servers/{}/versions/1.0.0",
        app.tenant,
        server().replace('/', "%2F")
    );
    let r = app
        .send(
            "PUT",
            &base,
            Some(&app.as_roles("pat", &["publisher"])),
            Some(card()),
        )
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    let r = app
        .send(
            "POST",
            &format!("{base}/review"),
            Some(&app.as_roles("rita", &["reviewer"])),
            Some(json!({"decision": "approve"})),
        )
        .await;
    assert_eq!(r.status, 200);
}
