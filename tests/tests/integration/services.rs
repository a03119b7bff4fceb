//! `--services`: a process serves the operational routes and the routes of
//! the services it is given, and answers every other service's paths with
//! 404 `route_not_found`, exactly as an unknown path. The routes of each
//! service are read from its own OpenAPI paths (`app::openapi_for`), so a
//! service that gains routes later is covered without touching this file.

use std::io::BufReader;
use std::process::{Command, Stdio};

use clap::Parser as _;
use pinfold_server::app::openapi_for;
use pinfold_server::cli::{Cli, Command as CliCommand, serve_config};
use pinfold_server::services::Service;
use pinfold_tests::*;
use serde_json::Value;

/// The operations of each service today; the test covers at least these,
/// so an empty or truncated route list cannot pass.
const OPERATIONS_TODAY: &[(Service, usize)] = &[
    (Service::Tenancy, 5),
    (Service::Registry, 15),
    (Service::Scope, 7),
    (Service::Guard, 3),
];

/// Served by every process, whatever its services.
const OPERATIONAL: &[&str] = &[
    "/healthz",
    "/readyz",
    "/metrics",
    "/openapi.json",
    "/docs/",
    "/.well-known/oauth-protected-resource",
];

/// One documented operation with its path made concrete.
struct Op {
    method: String,
    path: String,
    template: String,
}

/// The documented operations of `service` (none while it has no routes).
fn operations(service: Service, tenant: &str) -> Vec<Op> {
    let Some(doc) = openapi_for(service) else {
        return Vec::new();
    };
    let doc: Value = serde_json::to_value(doc).unwrap();
    let mut out = Vec::new();
    for (template, item) in doc["paths"].as_object().unwrap() {
        let mut path = template.replace("{tenant}", tenant);
        // Any value reaches the handler; the router only matches segments.
        while let Some(start) = path.find('{') {
            let end = path[start..].find('}').unwrap() + start;
            path.replace_range(start..=end, "x");
        }
        for method in ["get", "put", "post", "delete", "patch", "options"] {
            if item.get(method).is_some() {
                out.push(Op {
                    method: method.to_uppercase(),
                    path: path.clone(),
                    template: template.clone(),
                });
            }
        }
    }
    out
}

/// Whether `app` routes `op` to a handler. No token is sent, so nothing is
/// written: a routed request stops at authentication (or validation), an
/// unrouted one is the router's 404.
async fn routed(app: &TestApp, op: &Op) -> bool {
    let r = app
        .send_raw(&op.method, &op.path, None, Some(b"{}"), &[])
        .await;
    if r.status.as_u16() == 404 && r.json()["code"] == "route_not_found" {
        return false;
    }
    assert_ne!(
        r.status.as_u16(),
        405,
        "{} {}: {}",
        op.method,
        op.template,
        String::from_utf8_lossy(&r.bytes)
    );
    true
}

async fn operational_routes_answer(app: &TestApp, what: &str) {
    for path in OPERATIONAL {
        let r = app.send("GET", path, None, None).await;
        assert_eq!(r.status, 200, "{what}: GET {path}");
    }
}

#[tokio::test]
async fn each_process_serves_exactly_the_routes_of_its_services() {
    let app = TestApp::new().await;
    for (service, at_least) in OPERATIONS_TODAY {
        let n = operations(*service, app.tenant.as_str()).len();
        assert!(n >= *at_least, "{service}: {n} operations documented");
    }
    // The default (every service) answers every documented operation.
    for service in Service::ALL {
        for op in operations(service, app.tenant.as_str()) {
            assert!(
                routed(&app, &op).await,
                "all: {} {}",
                op.method,
                op.template
            );
        }
    }
    operational_routes_answer(&app, "all").await;
    // A process per service answers its own routes and 404 on the others'.
    for only in Service::ALL {
        let one = app.serving(&[only]);
        operational_routes_answer(&one, only.name()).await;
        for service in Service::ALL {
            for op in operations(service, app.tenant.as_str()) {
                assert_eq!(
                    routed(&one, &op).await,
                    service == only,
                    "--services {only}: {} {} belongs to {service}",
                    op.method,
                    op.template
                );
            }
        }
    }
}

#[tokio::test]
async fn a_registry_process_refuses_tenancy_and_resolve_paths() {
    let app = TestApp::new().await;
    let registry = app.serving(&[Service::Registry]);
    let t = app.tenant.as_str();
    let admin = app.admin();
    // Registry routes work with a real token...
    let r = registry
        .get(&format!("/v1/tenants/{t}/servers"), &admin)
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.bytes));
    // ...tenancy routes are not there, even with a valid token...
    registry
        .get(&format!("/v1/tenants/{t}"), &admin)
        .await
        .problem(404, "route_not_found");
    registry
        .get(&format!("/v1/tenants/{t}/policy"), &admin)
        .await
        .problem(404, "route_not_found");
    registry
        .send(
            "POST",
            "/v1/tenants",
            Some(&app.platform()),
            Some(serde_json::json!({"id": "nope", "name": "No"})),
        )
        .await
        .problem(404, "route_not_found");
    // ...nor resolve's.
    registry
        .send(
            "POST",
            &format!("/v1/tenants/{t}/sessions"),
            Some(&admin),
            Some(serde_json::json!({"server": "x"})),
        )
        .await
        .problem(404, "route_not_found");
    // The same database behind the default app answers the tenancy routes.
    let r = app.get(&format!("/v1/tenants/{t}"), &admin).await;
    assert_eq!(r.status, 200);
    // Every process documents the whole API (the proxy in front routes it).
    let doc = registry
        .send("GET", "/openapi.json", None, None)
        .await
        .json();
    assert!(doc["paths"].get("/v1/tenants/{tenant}/policy").is_some());
}

#[test]
fn services_come_from_flags_file_or_a_comma_separated_string() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pinfold.toml");
    std::fs::write(&file, "services = \"registry, scope\"\n").unwrap();
    let cfg = pinfold_server::config::Config::load(Some(&file), &Default::default()).unwrap();
    assert_eq!(
        cfg.services().unwrap(),
        vec![Service::Registry, Service::Scope]
    );
    let file_arg = file.to_str().unwrap();
    let parse = |services: &str| {
        let cli = Cli::try_parse_from([
            "pinfold",
            "serve",
            "--config",
            file_arg,
            "--services",
            services,
        ])
        .unwrap();
        let CliCommand::Serve(args) = cli.command else {
            panic!("not serve")
        };
        serve_config(&args)
    };
    // The flag wins over the file.
    assert_eq!(
        parse("tenancy,registry").unwrap().services().unwrap(),
        vec![Service::Tenancy, Service::Registry]
    );
    let e = parse("registry,billing").unwrap_err();
    assert!(format!("{e:#}").contains("\"billing\""), "{e:#}");
}

/// The environment variable carrying the `pinfold` arguments to the child.
const CLI_ARGS: &str = "PINFOLD_TEST_CLI_ARGS";

/// `pinfold serve --services registry` end to end: the command line as the
/// binary runs it (`cli::run`, in a child process of this test binary so
/// its global logger and signal handling are its own), over real TCP,
/// stopped with SIGTERM.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinfold_serve_services_registry_over_tcp() {
    const NAME: &str = "services::pinfold_serve_services_registry_over_tcp";
    if let Ok(args) = std::env::var(CLI_ARGS) {
        // The child: run the command line until SIGTERM.
        let argv: Vec<String> = serde_json::from_str(&args).unwrap();
        let cli = Cli::try_parse_from(argv).unwrap();
        assert_eq!(pinfold_server::cli::run(cli).await.unwrap(), 0);
        return;
    }
    let db = fresh_db().await;
    let argv = serde_json::json!([
        "pinfold",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        db.dir.path(),
        "--database-url",
        db.url,
        "--services",
        "registry"
    ]);
    let mut child = Command::new(std::env::current_exe().unwrap());
    if let Some(owner) = &db.owner_url {
        child.env("PINFOLD_DATABASE_OWNER_URL", owner);
    }
    let mut child = child
        .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
        .env(CLI_ARGS, argv.to_string())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let banner = read_banner(&mut BufReader::new(child.stdout.as_mut().unwrap()));
    let base = banner
        .lines()
        .find_map(|l| l.split_once(" listening on ").map(|(_, b)| b.trim()))
        .expect("listening line")
        .to_owned();
    assert!(banner.contains("services:  registry "), "{banner}");
    assert!(
        banner.contains(&format!("{base}/v1/tenants/dev/servers")),
        "{banner}"
    );
    let token = banner
        .lines()
        .find_map(|l| l.trim().strip_prefix("export PINFOLD_TOKEN="))
        .and_then(|l| l.split_whitespace().next())
        .expect("dev admin token")
        .to_owned();
    let http = reqwest::Client::new();
    for path in ["/healthz", "/readyz", "/metrics", "/openapi.json"] {
        let r = http.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
    }
    let r = http
        .get(format!("{base}/v1/tenants/dev/servers"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "registry route");
    let r = http
        .get(format!("{base}/v1/tenants/dev"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404, "tenancy route");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["code"], "route_not_found");
    // SIGTERM: graceful shutdown, exit 0 (the child's test passes).
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let rest = String::from_utf8_lossy(&out.stdout);
    let errors = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed: {rest}\n{errors}");
    assert!(rest.contains("1 passed"), "{rest}\n{errors}");
    assert!(errors.contains("Pinfold stopped."), "{errors}");
}

/// The Helm chart runs one Deployment per service in split mode; its list
/// of services is the server's, so a new service gets its own role.
#[test]
fn the_helm_chart_knows_every_service() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let helpers =
        std::fs::read_to_string(root.join("helm/pinfold/templates/_helpers.tpl")).unwrap();
    let define = helpers
        .split("{{- define \"pinfold.serviceNames\" -}}")
        .nth(1)
        .expect("pinfold.serviceNames in _helpers.tpl");
    let list = define
        .lines()
        .find(|l| l.contains("list "))
        .expect("a list of names");
    let names: Vec<&str> = list.split('"').skip(1).step_by(2).collect();
    assert_eq!(names, Service::ALL.map(Service::name).to_vec(), "{list}");
    let script = std::fs::read_to_string(root.join("scripts/check-helm.py")).unwrap();
    let expected = format!(
        "SERVICES = [{}]",
        Service::ALL.map(|s| format!("\"{}\"", s.name())).join(", ")
    );
    assert!(
        script.contains(&expected),
        "scripts/check-helm.py: {expected}"
    );
}
