//! `pinfold verify`: capture a live MCP server and check what it lists
//! against the signature Pinfold approved for it — the CI gate against rug
//! pulls (a tool that appears, a hint that turns less safe).
//!
//! 1. Read the version record from Pinfold (`GET
//!    /v1/tenants/{t}/servers/{name}/versions/{v}`, `latest` by default:
//!    the highest approved version). Only an approved (or deprecated,
//!    still trusted when pinned) version is something to verify against.
//! 2. Capture the live server ([`crate::capture::capture`]).
//! 3. Send the observed lists to Pinfold (`POST .../versions/{v}/verify`,
//!    the exact version read in step 1), which checks them under the
//!    tenant's mode for this server (or `--mode`).
//!
//! Pinfold is asked first so that a wrong token, tenant or name fails fast,
//! before the MCP server is touched. The report is a table, or JSON with
//! `--json`.

use std::io::Write;
use std::time::Duration;

use pinfold_core::Mode;
use pinfold_core::names::ServerName;
use reqwest::Method;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};

use pinfold_mcp_client::ClientProfile;

use crate::capture::{Captured, HeaderArg, Target, capture};
use crate::progress::Progress;
use crate::remote::{Remote, RemoteError, Reply, Token};

/// Exit codes of `pinfold verify`.
pub mod exit {
    /// The live server conforms (or violations under `advisory`).
    pub const CONFORMANT: i32 = 0;
    /// The live server does not conform under the mode.
    pub const NOT_CONFORMANT: i32 = 1;
    /// Bad arguments.
    pub const USAGE: i32 = 2;
    /// The MCP server could not be reached, started or understood.
    pub const MCP_SERVER: i32 = 3;
    /// Pinfold could not be reached, or failed.
    pub const PINFOLD_UNREACHABLE: i32 = 4;
    /// Pinfold refused the token (or there is none).
    pub const UNAUTHORIZED: i32 = 5;
    /// No such tenant, server or version, or the version is not approved.
    pub const NOT_FOUND: i32 = 6;
}

const EXIT_CODES: &str = "\
Exit codes:
  0  the live server conforms to the approved signature (violations under
     the advisory mode are reported and still exit 0)
  1  it does not conform under the mode (the tenant's for this server, or --mode)
  2  bad arguments
  3  the MCP server could not be reached, started or understood
  4  Pinfold could not be reached, or answered with an error
  5  Pinfold refused the token, the token variable is unset, or (with
     --github-oidc) the Actions runtime gave no token
  6  no such tenant, server or version in Pinfold, or the version is not approved";

/// `pinfold verify`.
#[derive(Debug, Clone, clap::Args)]
#[command(disable_version_flag = true, after_help = EXIT_CODES)]
pub struct VerifyArgs {
    /// Pinfold's base URL, e.g. https://pinfold.example.
    #[arg(long, value_name = "URL")]
    pub server: String,
    /// The tenant.
    #[arg(long)]
    pub tenant: String,
    /// The server's registry name ("namespace/name").
    #[arg(long)]
    pub name: String,
    /// The version to check against (exact, or latest: the highest
    /// approved).
    #[arg(long, default_value = "latest")]
    pub version: String,
    /// The live MCP server's Streamable HTTP endpoint.
    #[arg(long, value_name = "MCP_URL", required_unless_present = "command")]
    pub against: Option<String>,
    /// Or start the MCP server and check it over stdio: "CMD ARGS".
    #[arg(long, value_name = "CMD ARGS", conflicts_with = "against")]
    pub command: Option<String>,
    /// A header sent with every request to the MCP server, as "Name:
    /// value" (repeatable). Values are never printed.
    #[arg(long = "header", short = 'H', value_name = "NAME: VALUE")]
    pub headers: Vec<HeaderArg>,
    /// strict, permissive or advisory [default: the tenant's mode for this
    /// server].
    #[arg(long)]
    pub mode: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// The environment variable holding the bearer token for Pinfold.
    #[arg(long, value_name = "VAR", default_value = "PINFOLD_TOKEN")]
    pub token_env: String,
    /// `--github-oidc [--audience AUD]`.
    #[command(flatten)]
    pub oidc: crate::oidc::OidcArgs,
    /// Allow a plain http:// --server that is not this machine (the token
    /// then crosses the network unencrypted). Loopback http is always
    /// allowed.
    #[arg(long)]
    pub insecure_http: bool,
    /// Seconds to wait for Pinfold and for the MCP server.
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    pub timeout: u64,
    /// The capabilities the client advertises to the MCP server, as
    /// `pinfold capture --client-capabilities`: default (roots with
    /// listChanged, sampling, elicitation, the tool-resolution extension),
    /// none, or a JSON file.
    #[arg(
        long = "client-capabilities",
        value_name = "none|default|FILE.json",
        default_value = "default"
    )]
    pub client_capabilities: String,
}

/// A failure with its exit code and one line for stderr.
struct Stop(i32, String);

fn problem_text(reply: &Reply) -> String {
    match reply.problem() {
        Some(p) if !p.code.is_empty() => {
            let detail = p.detail.unwrap_or(p.title);
            format!("{} ({})", detail, p.code)
        }
        _ => {
            let body = String::from_utf8_lossy(&reply.body);
            body.chars().take(200).collect()
        }
    }
}

/// Maps a non-success answer of Pinfold to an exit code.
fn refused(reply: &Reply, what: &str) -> Stop {
    let text = problem_text(reply);
    let status = reply.status.as_u16();
    match status {
        401 | 403 => Stop(
            exit::UNAUTHORIZED,
            format!("Pinfold refused the token ({status}) when {what}: {text}"),
        ),
        404 => Stop(exit::NOT_FOUND, format!("{what}: {text}")),
        _ => Stop(
            exit::PINFOLD_UNREACHABLE,
            format!("Pinfold answered {status} when {what}: {text}"),
        ),
    }
}

fn unreachable(e: RemoteError) -> Stop {
    match e {
        RemoteError::BadUrl(_) | RemoteError::InsecureHttp(_) => {
            Stop(exit::USAGE, format!("--server: {e}"))
        }
        RemoteError::NoToken(_) => Stop(exit::UNAUTHORIZED, e.to_string()),
        RemoteError::Unreachable { .. } => Stop(exit::PINFOLD_UNREACHABLE, format!("Pinfold: {e}")),
    }
}

/// The version record's identity.
struct Record {
    version: String,
    digest: String,
    status: String,
}

async fn read_record(remote: &Remote, name: &str, version: &str) -> Result<Record, Stop> {
    let url = remote.tenant_url(&["servers", name, "versions", version]);
    let reply = remote
        .send(Method::GET, url, None, HeaderMap::new())
        .await
        .map_err(unreachable)?;
    if !reply.status.is_success() {
        return Err(refused(
            &reply,
            &format!("looking up {name} {version} in tenant {}", remote.tenant()),
        ));
    }
    let body = reply.json().unwrap_or(Value::Null);
    let field = |k: &str| body.get(k).and_then(Value::as_str).map(str::to_owned);
    match (field("version"), field("digest"), field("status")) {
        (Some(version), Some(digest), Some(status)) => Ok(Record {
            version,
            digest,
            status,
        }),
        _ => Err(Stop(
            exit::PINFOLD_UNREACHABLE,
            "Pinfold's version record lacks version, digest or status".into(),
        )),
    }
}

/// The approved card, when it can be read (what `pinfold capture` recorded
/// in it: the serverInfo and the client capability profiles).
async fn signed_card(remote: &Remote, name: &str, record: &Record) -> Option<Value> {
    let url = remote.tenant_url(&["servers", name, "versions", &record.version, "card"]);
    let reply = remote
        .send(Method::GET, url, None, HeaderMap::new())
        .await
        .ok()?;
    if !reply.status.is_success() {
        return None;
    }
    reply.json().filter(Value::is_object)
}

async fn check(
    remote: &Remote,
    name: &str,
    record: &Record,
    mode: Option<Mode>,
    captured: &Captured,
) -> Result<Value, Stop> {
    let mut url = remote.tenant_url(&["servers", name, "versions", &record.version, "verify"]);
    if let Some(m) = mode {
        url.query_pairs_mut().append_pair("mode", m.as_str());
    }
    let body = serde_json::to_vec(&captured.lists).map_err(|e| Stop(exit::USAGE, e.to_string()))?;
    let reply = remote
        .send(Method::POST, url, Some(body), HeaderMap::new())
        .await
        .map_err(unreachable)?;
    match reply.status.as_u16() {
        200 => reply.json().ok_or_else(|| {
            Stop(
                exit::PINFOLD_UNREACHABLE,
                "Pinfold's verify answer is not JSON".into(),
            )
        }),
        422 | 413 => Err(Stop(
            exit::MCP_SERVER,
            format!(
                "Pinfold cannot check what {} listed: {}",
                captured.label,
                problem_text(&reply)
            ),
        )),
        _ => Err(refused(
            &reply,
            &format!("verifying {name} {}", record.version),
        )),
    }
}

/// Pads each column of `rows` to its widest cell (the last one is not
/// padded).
fn table<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0usize; N];
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (i, (c, w)) in r.iter().zip(widths).enumerate() {
            if i == N - 1 {
                line.push_str(c);
            } else {
                line.push_str(&format!("{c:<w$}  "));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn render_table(report: &Value) -> String {
    let str_of = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    let mut out = format!(
        "Checked {} against {} {} ({}, {}) in {} mode\nObserved: {}\n",
        str_of(report, "against"),
        str_of(report, "server"),
        str_of(report, "version"),
        str_of(report, "status"),
        str_of(report, "digest"),
        str_of(report, "mode"),
        str_of(report, "observed"),
    );
    if let Some(p) = report["client_capabilities"]["profile"].as_str() {
        out.push_str(&format!("Client capabilities: {p}\n"));
    }
    out.push('\n');
    let violations = report["violations"].as_array().cloned().unwrap_or_default();
    let notices = report["notices"].as_array().cloned().unwrap_or_default();
    if !violations.is_empty() || !notices.is_empty() {
        // WHAT: the violation's own sentence (which hint got worse, and
        // how), then what the server showed.
        let mut rows = vec![[
            "KIND".to_owned(),
            "ITEM".to_owned(),
            "POINTER".to_owned(),
            "LESS SAFE".to_owned(),
            "WHAT".to_owned(),
        ]];
        for v in &violations {
            let mut what = str_of(v, "message");
            if let Some(o) = v.get("observed").filter(|o| !o.is_null()) {
                what.push_str(&format!("; observed {o}"));
            }
            rows.push([
                str_of(v, "kind"),
                str_of(v, "name"),
                str_of(v, "pointer"),
                if v["less_safe"] == true { "yes" } else { "no" }.to_owned(),
                what,
            ]);
        }
        for n in &notices {
            rows.push([
                format!("notice: {}", str_of(n, "kind")),
                str_of(n, "name"),
                str_of(n, "pointer"),
                "-".to_owned(),
                str_of(n, "message"),
            ]);
        }
        out.push_str(&table(&rows));
        out.push('\n');
    }
    if report["server_info"]["matches"] == false {
        out.push_str(&format!(
            "DIFFERENT SERVER: the signature was captured from {}, this server calls itself {}\n\n",
            report["server_info"]["signed"], report["server_info"]["observed"]
        ));
    }
    let verdict = if report["conformant"] == true {
        "CONFORMANT".to_owned()
    } else if report["fails"] == true {
        "NOT CONFORMANT".to_owned()
    } else {
        "NOT CONFORMANT (advisory: not failing)".to_owned()
    };
    out.push_str(&format!(
        "{verdict}: {} violation(s), {} notice(s)\n",
        violations.len(),
        notices.len()
    ));
    out
}

/// Runs `pinfold verify`; the report goes to `out`, progress and errors to
/// `progress`. Returns the exit code (see [`exit`]).
pub async fn run(
    args: VerifyArgs,
    out: &mut (dyn Write + Send),
    progress: &mut Progress<'_>,
) -> anyhow::Result<i32> {
    match verify(args, progress).await {
        Ok((code, report, json_out)) => {
            if json_out {
                serde_json::to_writer_pretty(&mut *out, &report)?;
                writeln!(out)?;
            } else {
                out.write_all(render_table(&report).as_bytes())?;
            }
            Ok(code)
        }
        Err(Stop(code, msg)) => {
            progress.line(&format!("pinfold verify: {msg}"));
            Ok(code)
        }
    }
}

async fn verify(args: VerifyArgs, progress: &mut Progress<'_>) -> Result<(i32, Value, bool), Stop> {
    let usage = |m: String| Stop(exit::USAGE, m);
    let mode = args
        .mode
        .as_deref()
        .map(|m| {
            m.parse::<Mode>()
                .map_err(|_| usage(format!("--mode {m:?}: use strict, permissive or advisory")))
        })
        .transpose()?;
    ServerName::parse(&args.name).map_err(|e| usage(format!("--name {:?}: {e}", args.name)))?;
    if args.version.trim().is_empty() {
        return Err(usage("--version must not be empty".into()));
    }
    if args.timeout == 0 {
        return Err(usage("--timeout must be at least 1 second".into()));
    }
    let profile =
        ClientProfile::parse(&args.client_capabilities).map_err(|e| usage(e.to_string()))?;
    let target = match (&args.against, &args.command) {
        (Some(u), _) => Target::http(u, &args.headers),
        (None, Some(c)) => Target::stdio(c, &args.headers),
        (None, None) => Err("give --against MCP_URL or --command".to_owned()),
    }
    .map_err(usage)?;
    let timeout = Duration::from_secs(args.timeout);
    // Check the URL before any credential is requested.
    Remote::new(
        &args.server,
        &args.tenant,
        None,
        timeout,
        args.insecure_http,
    )
    .map_err(unreachable)?;
    let token = if args.oidc.github_oidc {
        let audience = args.oidc.audience_for(&args.server);
        let refused = |e: crate::oidc::OidcError| Stop(exit::UNAUTHORIZED, e.to_string());
        crate::oidc::ActionsRuntime::from_env()
            .map_err(refused)?
            .id_token(&audience, timeout)
            .await
            .map_err(refused)?
    } else {
        Token::from_env(&args.token_env).map_err(unreachable)?
    };
    let remote = Remote::new(
        &args.server,
        &args.tenant,
        Some(token),
        timeout,
        args.insecure_http,
    )
    .map_err(unreachable)?;
    let record = progress
        .run(
            &format!(
                "verify: reading {} {} from Pinfold",
                args.name, args.version
            ),
            read_record(&remote, &args.name, &args.version),
        )
        .await?;
    if !matches!(record.status.as_str(), "approved" | "deprecated") {
        return Err(Stop(
            exit::NOT_FOUND,
            format!(
                "{} {} is {}, not approved: verify checks a live server against an approved signature",
                args.name, record.version, record.status
            ),
        ));
    }
    progress.line(&format!(
        "verify: client capabilities: {}",
        profile.describe()
    ));
    let captured = capture(&target, timeout, &profile, progress)
        .await
        .map_err(|e| Stop(exit::MCP_SERVER, e.to_string()))?;
    for n in &captured.notes {
        progress.line(&format!("verify: note: {n}"));
    }
    let mut report = progress
        .run(
            &format!("verify: checking against {} {}", args.name, record.version),
            check(&remote, &args.name, &record, mode, &captured),
        )
        .await?;
    // Pointed at the server that was signed? The card records the
    // serverInfo.name it was captured from.
    let card = signed_card(&remote, &args.name, &record).await;
    let card = card.as_ref().and_then(Value::as_object);
    let signed_name = card
        .and_then(crate::capture::recorded_server_info)
        .and_then(|i| i.get("name").and_then(Value::as_str).map(str::to_owned));
    // Captured under other capabilities than this check advertises: the
    // server may show each a different list.
    let signed_profiles = card
        .map(crate::capture::recorded_profiles)
        .unwrap_or_default();
    if !signed_profiles.is_empty() && !signed_profiles.contains(&captured.profile.record()) {
        let names: Vec<&str> = signed_profiles
            .iter()
            .filter_map(|p| p["profile"].as_str())
            .collect();
        progress.line(&format!(
            "verify: note: the signature was captured under client capabilities {}; this check advertises {} (--client-capabilities)",
            names.join(", "),
            captured.profile.name()
        ));
    }
    let same_server = match (&signed_name, &captured.reported_name) {
        (Some(signed), Some(live)) => signed == live,
        (Some(_), None) => false,
        (None, _) => true,
    };
    if let Some(signed) = &signed_name {
        report["server_info"] = json!({
            "signed": signed,
            "observed": captured.reported_name,
            "matches": same_server,
        });
        if !same_server {
            progress.line(&format!(
                "verify: {} was captured from a server calling itself {signed:?}, but {} calls itself {}",
                args.name,
                captured.label,
                captured
                    .reported_name
                    .as_deref()
                    .map_or("nothing (no serverInfo)".to_owned(), |n| format!("{n:?}"))
            ));
        }
    }
    let conformant = report["conformant"] == true && same_server;
    let advisory = report["mode"] == "advisory";
    let fails = !conformant && !advisory;
    report["conformant"] = json!(conformant);
    report["fails"] = json!(fails);
    report["server"] = json!(args.name);
    report["version"] = json!(record.version);
    report["digest"] = json!(record.digest);
    report["status"] = json!(record.status);
    report["against"] = json!(captured.label);
    report["protocol_version"] = json!(captured.protocol_version);
    report["observed"] = json!(captured.summary());
    report["client_capabilities"] = captured.profile.record();
    let code = if fails {
        exit::NOT_CONFORMANT
    } else {
        exit::CONFORMANT
    };
    Ok((code, report, args.json))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_lists_violations_and_notices() {
        let report = json!({
            "conformant": false, "fails": true, "mode": "strict",
            "server": "io.github.acme/files", "version": "1.0.0", "status": "approved",
            "digest": "sha256:ab", "against": "http://h/mcp", "observed": "4 tools, 0 prompts",
            "violations": [
                {"kind": "undeclared_tool", "name": "purge_files", "pointer": "/tools/3", "less_safe": true},
                {"kind": "annotation_not_declared", "name": "list_files", "pointer": "/tools/2/annotations", "less_safe": true,
                 "message": "tool \"list_files\" annotations match none of the 1 declared possibilities and exceed the worst case on destructiveHint",
                 "observed": {"destructiveHint": true, "readOnlyHint": false}}
            ],
            "notices": [{"kind": "description_changed", "name": "t", "pointer": "/tools/0/description"}]
        });
        let t = render_table(&report);
        assert!(t.contains("in strict mode"), "{t}");
        let lines: Vec<&str> = t.lines().collect();
        let header = lines.iter().position(|l| l.starts_with("KIND")).unwrap();
        let cells: Vec<&str> = lines[header + 1].split_whitespace().collect();
        assert_eq!(cells, ["undeclared_tool", "purge_files", "/tools/3", "yes"]);
        // Which hint got worse, and what the server showed, without --json.
        assert!(
            lines[header + 2].ends_with(
                "exceed the worst case on destructiveHint; observed {\"destructiveHint\":true,\"readOnlyHint\":false}"
            ),
            "{t}"
        );
        // Columns line up: every row's pointer starts where the header's does.
        let col = lines[header].find("POINTER").unwrap();
        assert_eq!(lines[header + 2].find("/tools/2").unwrap(), col, "{t}");
        assert!(
            lines[header + 3].starts_with("notice: description_changed"),
            "{t}"
        );
        assert!(
            t.trim_end()
                .ends_with("NOT CONFORMANT: 2 violation(s), 1 notice(s)"),
            "{t}"
        );
        let ok = json!({"conformant": true, "violations": [], "notices": []});
        assert!(render_table(&ok).contains("CONFORMANT: 0 violation(s)"));
        assert!(!render_table(&ok).contains("KIND"));
    }
}
