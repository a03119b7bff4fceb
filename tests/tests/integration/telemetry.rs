//! Telemetry: OTLP export of traces and metrics to an in-test collector, the
//! trace id on log lines, and the never-log rules (no token, secret, upstream
//! header or request body in any log line or exported span).
//!
//! The subscriber is the server's own ([`Telemetry::build`]), made the
//! default of the test's thread (the runtime is current-thread, so the
//! server's tasks run there too); nothing is installed globally.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use pinfold_server::config::Config;
use pinfold_server::telemetry::{LogCapture, LogOutput, Settings, Telemetry};
use pinfold_tests::*;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------
// An OTLP/HTTP receiver on loopback
// ---------------------------------------------------------------------------

#[derive(Clone, Default)]
struct Received {
    traces: Arc<Mutex<Vec<Vec<u8>>>>,
    metrics: Arc<Mutex<Vec<Vec<u8>>>>,
}

/// A collector accepting `POST /v1/traces` and `POST /v1/metrics`. It runs
/// on its own thread and runtime, because exporters flush synchronously
/// from the test's thread.
struct Collector {
    addr: SocketAddr,
    got: Received,
}

impl Collector {
    fn start() -> Collector {
        let got = Received::default();
        let state = got.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let app = axum::Router::new()
                    .route(
                        "/v1/traces",
                        post(|State(s): State<Received>, body: Bytes| async move {
                            s.traces.lock().unwrap().push(body.to_vec());
                            (
                                [("content-type", "application/x-protobuf")],
                                Vec::<u8>::new(),
                            )
                        }),
                    )
                    .route(
                        "/v1/metrics",
                        post(|State(s): State<Received>, body: Bytes| async move {
                            s.metrics.lock().unwrap().push(body.to_vec());
                            (
                                [("content-type", "application/x-protobuf")],
                                Vec::<u8>::new(),
                            )
                        }),
                    )
                    .with_state(state);
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx.send(listener.local_addr().unwrap()).unwrap();
                axum::serve(listener, app).await.unwrap();
            });
        });
        let addr = rx.recv().expect("collector started");
        Collector { addr, got }
    }

    fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn spans(&self) -> Vec<OtlpSpan> {
        let bodies = self.got.traces.lock().unwrap().clone();
        bodies.iter().flat_map(|b| decode_spans(b)).collect()
    }

    fn raw_traces(&self) -> Vec<u8> {
        self.got.traces.lock().unwrap().concat()
    }

    fn raw_metrics(&self) -> Vec<u8> {
        self.got.metrics.lock().unwrap().concat()
    }
}

// ---------------------------------------------------------------------------
// Just enough protobuf to read an ExportTraceServiceRequest
// ---------------------------------------------------------------------------

enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed(u64),
}

fn varint(b: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = b.split_first()?;
        *b = rest;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// The fields of one message, in order (stops at the first malformed byte).
fn fields(mut b: &[u8]) -> Vec<(u64, Wire<'_>)> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let Some(key) = varint(&mut b) else { break };
        let value = match key & 7 {
            0 => match varint(&mut b) {
                Some(v) => Wire::Varint(v),
                None => break,
            },
            1 if b.len() >= 8 => {
                let (x, rest) = b.split_at(8);
                b = rest;
                Wire::Fixed(u64::from_le_bytes(x.try_into().unwrap()))
            }
            2 => {
                let Some(len) = varint(&mut b) else { break };
                let len = len as usize;
                if b.len() < len {
                    break;
                }
                let (x, rest) = b.split_at(len);
                b = rest;
                Wire::Bytes(x)
            }
            5 if b.len() >= 4 => {
                let (x, rest) = b.split_at(4);
                b = rest;
                Wire::Fixed(u64::from(u32::from_le_bytes(x.try_into().unwrap())))
            }
            _ => break,
        };
        out.push((key >> 3, value));
    }
    out
}

fn sub(b: &[u8], n: u64) -> Vec<&[u8]> {
    fields(b)
        .into_iter()
        .filter_map(|(k, v)| match (k == n, v) {
            (true, Wire::Bytes(x)) => Some(x),
            _ => None,
        })
        .collect()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// KeyValue list → key → value as text.
fn attributes(msg: &[u8], field: u64) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for kv in sub(msg, field) {
        let key = sub(kv, 1).first().map(|k| text(k)).unwrap_or_default();
        let mut value = String::new();
        if let Some(any) = sub(kv, 2).first() {
            for (k, v) in fields(any) {
                value = match (k, v) {
                    (1, Wire::Bytes(s)) => text(s),
                    (2, Wire::Varint(b)) => (b != 0).to_string(),
                    (3, Wire::Varint(i)) => (i as i64).to_string(),
                    (4, Wire::Fixed(f)) => f64::from_bits(f).to_string(),
                    _ => continue,
                };
            }
        }
        out.insert(key, value);
    }
    out
}

/// One exported span.
#[derive(Debug)]
struct OtlpSpan {
    service: String,
    trace_id: String,
    span_id: String,
    parent_span_id: String,
    name: String,
    kind: u64,
    attrs: BTreeMap<String, String>,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn decode_spans(body: &[u8]) -> Vec<OtlpSpan> {
    let mut out = Vec::new();
    for rs in sub(body, 1) {
        let service = sub(rs, 1)
            .first()
            .map(|r| attributes(r, 1))
            .and_then(|a| a.get("service.name").cloned())
            .unwrap_or_default();
        for ss in sub(rs, 2) {
            for span in sub(ss, 2) {
                let mut s = OtlpSpan {
                    service: service.clone(),
                    trace_id: String::new(),
                    span_id: String::new(),
                    parent_span_id: String::new(),
                    name: String::new(),
                    kind: 0,
                    attrs: attributes(span, 9),
                };
                for (k, v) in fields(span) {
                    match (k, v) {
                        (1, Wire::Bytes(b)) => s.trace_id = hex(b),
                        (2, Wire::Bytes(b)) => s.span_id = hex(b),
                        (4, Wire::Bytes(b)) => s.parent_span_id = hex(b),
                        (5, Wire::Bytes(b)) => s.name = text(b),
                        (6, Wire::Varint(k)) => s.kind = k,
                        _ => {}
                    }
                }
                out.push(s);
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_SPAN: &str = "00f067aa0ba902b7";

/// The server's telemetry with OTLP export to `collector`, not installed
/// globally; `tweak` adjusts the `[telemetry]` section.
fn telemetry_for(
    cfg: &mut Config,
    collector: &Collector,
    logs: &LogCapture,
    tweak: impl FnOnce(&mut Config),
) -> Telemetry {
    cfg.telemetry.traces = true;
    cfg.telemetry.metrics = true;
    cfg.telemetry.endpoint = collector.endpoint();
    cfg.telemetry.service_name = "pinfold-test".into();
    tweak(cfg);
    cfg.validate().expect("valid telemetry settings");
    // The test's own environment must not change the outcome.
    let settings =
        Settings::resolve(&cfg.telemetry, cfg.log_format(), &|_| None).expect("settings");
    Telemetry::build(&settings, LogOutput::Capture(logs.clone())).expect("telemetry")
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[tokio::test]
async fn spans_and_metrics_reach_an_otlp_collector_with_the_callers_trace() {
    if !in_own_process(
        "telemetry::spans_and_metrics_reach_an_otlp_collector_with_the_callers_trace",
    ) {
        return;
    }
    let collector = Collector::start();
    let logs = LogCapture::new();
    let db = fresh_db().await;
    let mut cfg = config_for(&db);
    cfg.listen = "127.0.0.1:0".into();
    let telemetry = telemetry_for(&mut cfg, &collector, &logs, |c| {
        c.telemetry.log_filter = "info,pinfold_server=debug".into();
    });
    let _default = telemetry.set_default();
    let data_dir = cfg.data_dir.clone();

    let running = pinfold_server::serve::start(cfg, None)
        .await
        .expect("start");
    let base = format!("http://{}", running.addr);
    let tokens = running.dev_tokens.clone().expect("dev mode");
    let http = reqwest::Client::new();
    let tenant = format!("otel-{}", &uuid::Uuid::new_v4().simple().to_string()[..10]);
    // A reader of the new tenant (the platform token holds no role inside it).
    let reader = pinfold_server::devkeys::DevKey::load(&data_dir)
        .unwrap()
        .mint(
            "otel-reader",
            Some(&tenant),
            &["reader"],
            std::time::Duration::from_secs(600),
        )
        .unwrap();
    let r = http
        .post(format!("{base}/v1/tenants"))
        .bearer_auth(&tokens.platform)
        .json(&json!({"id": tenant, "name": "Traced"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    // A request from a traced caller.
    let r = http
        .get(format!("{base}/v1/tenants/{tenant}"))
        .bearer_auth(&reader)
        .header("traceparent", format!("00-{TRACE_ID}-{PARENT_SPAN}-01"))
        .header("x-request-id", "otel-req-1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = http
        .get(format!("{base}/no/such/route"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    running.shutdown().await.unwrap();
    telemetry.guard().flush();

    let spans = collector.spans();
    let traced = spans
        .iter()
        .find(|s| s.attrs.get("request.id").map(String::as_str) == Some("otel-req-1"))
        .unwrap_or_else(|| panic!("no span for the traced request in {spans:#?}"));
    assert_eq!(traced.trace_id, TRACE_ID, "the inbound trace is honoured");
    assert_eq!(traced.parent_span_id, PARENT_SPAN);
    assert_eq!(traced.name, "GET /v1/tenants/{tenant}");
    assert_eq!(traced.kind, 2, "SPAN_KIND_SERVER");
    assert_eq!(traced.service, "pinfold-test");
    assert_eq!(traced.attrs["http.route"], "/v1/tenants/{tenant}");
    assert_eq!(traced.attrs["http.method"], "GET");
    assert_eq!(traced.attrs["http.status"], "200");
    assert_eq!(traced.attrs["tenant.id"], tenant);
    assert_eq!(traced.attrs["trace.id"], TRACE_ID);
    let create = spans
        .iter()
        .find(|s| s.name == "POST /v1/tenants")
        .expect("the create span");
    assert_eq!(create.attrs["http.status"], "201");
    assert_ne!(
        create.trace_id, TRACE_ID,
        "an untraced request starts its own trace"
    );
    assert_eq!(create.parent_span_id, "", "a root span");
    let unmatched = spans
        .iter()
        .find(|s| s.attrs.get("http.route").map(String::as_str) == Some("unmatched"))
        .expect("the 404 span");
    assert_eq!(unmatched.attrs["http.status"], "404");

    // The same instruments as /metrics, with bounded labels only.
    let metrics = collector.raw_metrics();
    let m = String::from_utf8_lossy(&metrics);
    for want in [
        "pinfold.http.requests",
        "pinfold.http.request.duration",
        "pinfold.build.info",
        "/v1/tenants/{tenant}",
        "unmatched",
    ] {
        assert!(m.contains(want), "OTLP metrics lack {want:?}");
    }
    assert!(
        !m.contains(&tenant),
        "tenant ids must not become metric labels"
    );

    // Every log line of the traced request carries its trace id.
    let text = logs.contents();
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("otel-req-1")).collect();
    assert!(
        !lines.is_empty(),
        "no log line for the traced request:\n{text}"
    );
    for l in lines {
        assert!(l.contains(&format!("trace.id={TRACE_ID}")), "{l}");
    }
    telemetry.guard().flush();
}

/// Values that must never appear in a log line or an exported span.
#[derive(Default)]
struct Secrets(Vec<(String, String)>);

impl Secrets {
    /// Remembers `value` (and, for a JWT, its signature on its own).
    fn add(&mut self, what: &str, value: &str) {
        self.0.push((what.to_owned(), value.to_owned()));
        if let Some(sig) = value
            .rsplit('.')
            .next()
            .filter(|_| value.matches('.').count() == 2)
        {
            self.0.push((format!("{what} (signature)"), sig.to_owned()));
        }
    }

    /// Remembers key material in every text form a log line could carry
    /// it: hex, both base64 alphabets, and a debug-printed byte list.
    fn add_bytes(&mut self, what: &str, bytes: &[u8]) {
        use base64::Engine as _;
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        self.add(&format!("{what} (hex)"), &hex);
        self.add(&format!("{what} (base64url)"), &b64(bytes));
        self.add(
            &format!("{what} (base64)"),
            &base64::engine::general_purpose::STANDARD.encode(bytes),
        );
        self.add(&format!("{what} (bytes)"), &format!("{bytes:?}"));
    }

    #[track_caller]
    fn assert_absent(&self, place: &str, haystack: &[u8]) {
        for (what, value) in &self.0 {
            assert!(
                !haystack.windows(value.len()).any(|w| w == value.as_bytes()),
                "{what} leaked into {place}"
            );
        }
    }
}

/// Tenant creation, policy read and update with `If-Match`, the audit log,
/// and rejected tokens, with credentials in headers a proxy might forward.
async fn tenancy_flow(app: &TestApp, secrets: &mut Secrets) {
    let admin = app.admin();
    secrets.add("admin token", &admin);
    secrets.add("platform token", &app.platform());
    let marker = format!("argument-{}", uuid::Uuid::new_v4().simple());
    secrets.add("request body", &marker);
    let path = format!("/v1/tenants/{}/policy", app.tenant);
    let r = app.get(&path, &admin).await;
    assert_eq!(r.status, 200);
    let policy = json!({
        "enforcement_mode": "strict",
        "approval_required": false,
        "overrides": {"servers": {"io.github.acme/files": {
            "tools": {"delete_file": {"destructiveHint": true, "x-note": marker}}
        }}}
    });
    let body = policy.to_string();
    let r = app
        .send_raw(
            "PUT",
            &path,
            Some(&admin),
            Some(body.as_bytes()),
            &[("if-match", "\"r1\"")],
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    let r = app
        .get(&format!("/v1/tenants/{}/audit", app.tenant), &admin)
        .await;
    assert_eq!(r.status, 200);
    // HS256 tokens, and tokens that fail verification.
    let hs = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &json!({"iss": HS_ISSUER, "aud": AUDIENCE, "sub": "hs-user", "tenant": app.tenant.as_str(),
                "roles": ["reader"], "exp": now() + 600}),
        &jsonwebtoken::EncodingKey::from_secret(HS_SECRET.as_bytes()),
    )
    .unwrap();
    secrets.add("HS256 token", &hs);
    secrets.add("HS256 secret", HS_SECRET);
    assert_eq!(
        app.get(&format!("/v1/tenants/{}", app.tenant), &hs)
            .await
            .status,
        200
    );
    let mut forged = admin.clone().into_bytes();
    let i = forged.len() - 10;
    forged[i] = if forged[i] == b'A' { b'B' } else { b'A' };
    let forged = String::from_utf8(forged).unwrap();
    secrets.add("forged token", &forged);
    assert_eq!(app.get(&path, &forged).await.status, 401);
    let garbage = "not-a-jwt-but-a-secret-0f9e8d7c";
    secrets.add("malformed token", garbage);
    assert_eq!(app.get(&path, garbage).await.status, 401);
    // Credentials meant for upstreams must not be echoed anywhere either.
    let upstream = [
        ("cookie", "session=upstream-cookie-5a4b3c"),
        ("x-api-key", "upstream-api-key-1d2e3f"),
        ("proxy-authorization", "Basic dXBzdHJlYW06c2VjcmV0"),
        ("x-upstream-authorization", "Bearer upstream-bearer-9z8y7x"),
    ];
    for (h, v) in upstream {
        secrets.add(h, v);
    }
    let r = app
        .send_raw(
            "GET",
            &format!("/v1/tenants/{}", app.tenant),
            Some(&admin),
            None,
            &upstream,
        )
        .await;
    assert_eq!(r.status, 200);
}

/// The registry flow: publish, review, every read view (with a
/// conditional read), diff, verify, attestation, JWKS, import and a status
/// change, each with its own bearer token; the server encryption key and the
/// tenant's attestation key are secrets too.
async fn registry_flow(app: &TestApp, secrets: &mut Secrets) {
    use base64::Engine as _;
    let tenant = app.tenant.as_str();
    let publisher = app.as_roles("paula-publisher", &["publisher"]);
    let reviewer = app.as_roles("rick-reviewer", &["reviewer"]);
    let reader = app.as_roles("rita-reader", &["reader"]);
    let client = app.as_roles("gateway", &["client"]);
    let admin = app.admin();
    for (what, t) in [
        ("publisher token", &publisher),
        ("reviewer token", &reviewer),
        ("reader token", &reader),
        ("client token", &client),
    ] {
        secrets.add(what, t);
    }
    secrets.add("encryption key", &app.encryption_key);
    let raw = base64::engine::general_purpose::STANDARD
        .decode(&app.encryption_key)
        .expect("a base64 encryption key");
    secrets.add_bytes("encryption key", &raw);
    let key = app
        .store
        .registry()
        .tenant_key(&app.tenant)
        .await
        .unwrap()
        .expect("the tenant's attestation key");
    secrets.add("sealed attestation key", &key.private_sealed);
    let pkcs8 = pinfold_registry::keys::Keyring::from_base64(&app.encryption_key)
        .unwrap()
        .open(&app.tenant, &key.private_sealed)
        .expect("the key opens");
    secrets.add_bytes("attestation key (PKCS#8)", &pkcs8);
    // The Ed25519 seed: the 32-byte OCTET STRING inside the private-key
    // OCTET STRING (04 22 04 20).
    let at = pkcs8
        .windows(4)
        .position(|w| w == [0x04, 0x22, 0x04, 0x20])
        .expect("an Ed25519 PKCS#8 document")
        + 4;
    secrets.add_bytes("attestation key (seed)", &pkcs8[at..at + 32]);

    // Versions wait for a reviewer.
    let r = app
        .send(
            "PUT",
            &format!("/v1/tenants/{tenant}/policy"),
            Some(&admin),
            Some(json!({"enforcement_mode": "strict", "approval_required": true})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    let server = "io.github.acme/files";
    let s = server.replace('/', "%2F");
    let base = format!("/v1/tenants/{tenant}/servers/{s}");
    let card = |version: &str| {
        json!({
            "name": server, "version": version, "description": "Files",
            "signature": {"tools": [{"name": "read_file", "description": "Read a file",
                "inputSchema": {"type": "object"},
                "annotations": {"readOnlyHint": true, "openWorldHint": false}}],
                "prompts": [], "resources": [], "resourceTemplates": []}
        })
    };
    for (version, status) in [("1.0.0", 201), ("1.0.0", 200), ("1.1.0", 201)] {
        let r = app
            .send(
                "PUT",
                &format!("{base}/versions/{version}"),
                Some(&publisher),
                Some(card(version)),
            )
            .await;
        assert_eq!(r.status, status, "{}", String::from_utf8_lossy(&r.bytes));
    }
    let r = app
        .send(
            "POST",
            &format!("{base}/versions/1.0.0/review"),
            Some(&reviewer),
            Some(json!({"decision": "approve", "note": "fine"})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    let v = format!("{base}/versions/1.0.0");
    let r = app.get(&v, &reader).await;
    assert_eq!(r.status, 200);
    let etag = r.header("etag").expect("an ETag");
    let r = app
        .send_raw("GET", &v, Some(&reader), None, &[("if-none-match", &etag)])
        .await;
    assert_eq!(r.status, 304);
    for path in [
        format!("/v1/tenants/{tenant}/servers"),
        base.clone(),
        format!("{base}/versions/latest"),
        format!("{v}/signature"),
        format!("{v}/tools"),
        format!("{v}/card"),
        format!("{base}/diff?from=1.0.0&to=1.1.0"),
        format!("/v1/tenants/{tenant}/jwks.json"),
    ] {
        assert_eq!(app.get(&path, &client).await.status, 200, "{path}");
    }
    let r = app
        .send(
            "POST",
            &format!("{v}/verify"),
            Some(&client),
            Some(json!({"tools": [{"name": "read_file", "inputSchema": {"type": "object"}}]})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    let r = app.get(&format!("{v}/attestation"), &client).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type").as_deref(), Some("application/jwt"));
    let r = app
        .send(
            "POST",
            &format!("/v1/tenants/{tenant}/import/server-json"),
            Some(&publisher),
            Some(json!({"name": "io.github.acme/weather", "version": "0.3.0", "description": "Weather"})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.bytes));
    let r = app
        .send(
            "POST",
            &format!("{v}/status"),
            Some(&admin),
            Some(json!({"status": "revoked", "reason": "rotated"})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    // A refused request logs too: a reader may not publish.
    let r = app
        .send(
            "PUT",
            &format!("{base}/versions/2.0.0"),
            Some(&reader),
            Some(card("2.0.0")),
        )
        .await;
    assert_eq!(r.status, 403);
}

#[tokio::test]
async fn no_token_secret_or_upstream_header_reaches_logs_or_spans() {
    if !in_own_process("telemetry::no_token_secret_or_upstream_header_reaches_logs_or_spans") {
        return;
    }
    let collector = Collector::start();
    let logs = LogCapture::new();
    // Everything, at the most verbose level, in JSON.
    let mut cfg = Config {
        log_format: "json".into(),
        ..Config::default()
    };
    let telemetry = telemetry_for(&mut cfg, &collector, &logs, |c| {
        c.telemetry.log_filter = "trace".into();
        c.telemetry.trace_filter = "trace".into();
    });
    let _default = telemetry.set_default();
    // A real, random encryption key rather than the suite's fixed one.
    let key = pinfold_registry::keys::Keyring::generate_base64().unwrap();
    let app = TestApp::build(test_issuers(), |c| c.encryption_key = Some(key)).await;
    let mut secrets = Secrets::default();
    tenancy_flow(&app, &mut secrets).await;
    registry_flow(&app, &mut secrets).await;
    telemetry.guard().flush();

    let text = logs.contents();
    assert!(text.lines().count() > 5, "the flow was logged:\n{text}");
    for line in text.lines() {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a JSON log line ({e}): {line}"));
        if line.contains("\"http.request\"") {
            assert!(
                v.to_string().contains("trace.id"),
                "request log line without trace id: {line}"
            );
        }
    }
    secrets.assert_absent("the logs", text.as_bytes());
    let spans = collector.spans();
    assert!(
        spans
            .iter()
            .any(|s| s.attrs.get("tenant.id").map(String::as_str) == Some(app.tenant.as_str())),
        "spans were exported: {spans:#?}"
    );
    secrets.assert_absent("the exported spans", &collector.raw_traces());
    secrets.assert_absent("the exported metrics", &collector.raw_metrics());
}
