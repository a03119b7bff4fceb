//! `pinfold publish FILE --server URL --tenant T`: publish a server card (with
//! its `signature`) as an immutable version, from CI.
//!
//! The server name and version come from the card; the request is the
//! registry's `PUT /v1/tenants/{tenant}/servers/{name}/versions/{version}`,
//! which is idempotent (the same content again is `200`), so it is safe to
//! retry. Every outcome is one line on stdout and an exit code CI can branch
//! on ([`EXIT_CODES`]); progress and retries go to stderr.
//!
//! With `--wait-approved` the command then polls the version's record
//! (conditional `GET`s, with backoff) until a reviewer approves it, rejects
//! it, or the timeout passes.

use std::io::{Read as _, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use reqwest::header::{ETAG, HeaderMap, HeaderValue, IF_NONE_MATCH};
use reqwest::{Method, StatusCode};
use serde::Deserialize;
use serde_json::Value;

use crate::oidc::ActionsRuntime;
use crate::remote::{Remote, RemoteError, Reply, Token};
use crate::retry::{self, RetryPolicy};

/// Exit codes of `pinfold publish` (also printed by `--help`).
pub mod exit {
    /// Created, or identical content already published (and, with
    /// `--wait-approved`, approved).
    pub const OK: i32 = 0;
    /// Anything else: an answer the command does not expect (for example a
    /// server that does not run the registry).
    pub const OTHER: i32 = 1;
    /// Usage: bad flags, an unreadable file, a file that is not JSON.
    pub const USAGE: i32 = 2;
    /// The version exists with other content.
    pub const CONFLICT: i32 = 3;
    /// The card is invalid (every error listed with its JSON pointer).
    pub const INVALID: i32 = 4;
    /// No usable credential, or Pinfold refused it (401, 403, or 404 for a
    /// tenant the token cannot see).
    pub const UNAUTHORISED: i32 = 5;
    /// Pinfold could not be reached, or kept answering 408/429/5xx.
    pub const UNREACHABLE: i32 = 6;
    /// `--wait-approved`: the version was rejected, revoked or deprecated.
    pub const NOT_APPROVED: i32 = 7;
    /// `--wait-approved`: still pending when the timeout passed.
    pub const TIMEOUT: i32 = 8;
}

/// The exit code table, as `--help` prints it.
pub const EXIT_CODES: &str = "\
Exit codes:
  0  created, or identical content already published (with --wait-approved: approved)
  1  unexpected answer (e.g. the server does not run the registry)
  2  usage: bad flags, unreadable file, not JSON, plain http:// to another
     host without --insecure-http
  3  conflict: the version exists with other content (both digests shown)
  4  invalid card (every error shown with its JSON pointer; 422, 400, 413)
  5  unauthorised: no token, token refused (401/403), or tenant not visible to it (404)
  6  unreachable: transport failure, or 408/429/5xx after retries
  7  not approved: rejected, revoked or deprecated while waiting (--wait-approved)
  8  timeout: still pending after --timeout (--wait-approved)

Outcomes are one line on stdout, e.g.
  created io.github.acme/files 1.0.0 sha256:... (pending)
  conflict io.github.acme/files 1.0.0: published sha256:..., yours sha256:...
  invalid: /signature/tools/0/inputSchema: ...; /version: ...";

/// `pinfold publish`.
#[derive(Debug, Clone, Args)]
#[command(after_help = EXIT_CODES)]
pub struct PublishArgs {
    /// The server card to publish, with its `signature` (what `pinfold
    /// capture` writes); `-` reads stdin. Name and version come from it.
    pub file: PathBuf,
    /// Pinfold's base URL, e.g. https://pinfold.example.
    #[arg(long, value_name = "URL")]
    pub server: String,
    /// The tenant to publish in.
    #[arg(long, value_name = "TENANT")]
    pub tenant: String,
    /// Environment variable holding the bearer token.
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
    /// After publishing, wait until the version is approved.
    #[arg(long)]
    pub wait_approved: bool,
    /// How long --wait-approved waits, e.g. 90s, 10m, 1h.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_duration, requires = "wait_approved")]
    pub timeout: Duration,
}

/// Parses `90s`, `10m`, `2h` or plain seconds; at least one second, at
/// most a day.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 90s, 10m or 1h"))?;
    let secs = match unit {
        "" | "s" => Some(n),
        "m" => n.checked_mul(60),
        "h" => n.checked_mul(3600),
        _ => return Err(format!("{s:?}: the unit must be s, m or h")),
    };
    match secs {
        Some(v) if (1..=86_400).contains(&v) => Ok(Duration::from_secs(v)),
        _ => Err(format!("{s:?}: must be between 1s and 24h")),
    }
}

/// A duration as `--timeout` takes it (`10m`, `90s`, `1h`).
fn show(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 && s.is_multiple_of(3600) {
        format!("{}h", s / 3600)
    } else if s >= 60 && s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

/// The fields of a version record the command reports.
#[derive(Debug, Clone, Default, Deserialize)]
struct Record {
    #[serde(default)]
    server: String,
    #[serde(default)]
    version: String,
    #[serde(default)]
    digest: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    status_reason: Option<String>,
    #[serde(default)]
    approved_by: Option<String>,
    #[serde(default)]
    reviews: Vec<ReviewEntry>,
}

#[derive(Debug, Clone, Deserialize)]
struct ReviewEntry {
    #[serde(default)]
    reviewer: String,
}

/// How a run ended: one line on stdout and an exit code.
#[derive(Debug)]
enum Outcome {
    Created(Record),
    Identical(Record),
    Conflict {
        name: String,
        version: String,
        published: String,
        yours: String,
    },
    Invalid(Vec<(String, String)>),
    Unauthorised(String),
    Unreachable(String),
    Approved(Record),
    NotApproved(Record),
    TimedOut(Record, Duration),
    Other(String),
}

impl Outcome {
    fn code(&self) -> i32 {
        match self {
            Outcome::Created(_) | Outcome::Identical(_) | Outcome::Approved(_) => exit::OK,
            Outcome::Other(_) => exit::OTHER,
            Outcome::Conflict { .. } => exit::CONFLICT,
            Outcome::Invalid(_) => exit::INVALID,
            Outcome::Unauthorised(_) => exit::UNAUTHORISED,
            Outcome::Unreachable(_) => exit::UNREACHABLE,
            Outcome::NotApproved(_) => exit::NOT_APPROVED,
            Outcome::TimedOut(..) => exit::TIMEOUT,
        }
    }

    fn line(&self) -> String {
        let id = |r: &Record| format!("{} {} {}", r.server, r.version, r.digest);
        let line = match self {
            Outcome::Created(r) => format!("created {} ({})", id(r), r.status),
            Outcome::Identical(r) => format!("identical {} ({})", id(r), r.status),
            Outcome::Conflict {
                name,
                version,
                published,
                yours,
            } => format!("conflict {name} {version}: published {published}, yours {yours}"),
            Outcome::Invalid(errors) => {
                let list: Vec<String> = errors
                    .iter()
                    .map(|(p, m)| {
                        let p = if p.is_empty() { "(document)" } else { p };
                        format!("{p}: {m}")
                    })
                    .collect();
                format!("invalid: {}", list.join("; "))
            }
            Outcome::Unauthorised(why) => format!("unauthorised: {why}"),
            Outcome::Unreachable(why) => format!("unreachable: {why}"),
            Outcome::Approved(r) => {
                let by = r
                    .approved_by
                    .as_deref()
                    .map(|b| format!(" by {b}"))
                    .unwrap_or_default();
                format!("approved {}{by}", id(r))
            }
            Outcome::NotApproved(r) => {
                let by = match r.status.as_str() {
                    "rejected" => r
                        .reviews
                        .last()
                        .map(|v| format!(" by {}", v.reviewer))
                        .unwrap_or_default(),
                    _ => String::new(),
                };
                let why = r
                    .status_reason
                    .as_deref()
                    .map(|n| format!(": {n}"))
                    .unwrap_or_default();
                format!("{} {}{by}{why}", r.status, id(r))
            }
            Outcome::TimedOut(r, after) => format!(
                "timeout {} still {} after {}",
                id(r),
                r.status,
                show(*after)
            ),
            Outcome::Other(why) => format!("error: {why}"),
        };
        one_line(&line)
    }
}

/// Control characters (a newline in a server's message) would break the
/// one-line contract: each becomes a space.
fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// Where the bearer token comes from.
enum Credentials {
    /// A token read from the environment.
    Static(Token),
    /// GitHub Actions OIDC: a short-lived token, asked for again when
    /// Pinfold says it has expired (an Actions ID token lives minutes; a wait
    /// for approval may outlast it).
    Actions {
        runtime: ActionsRuntime,
        audience: String,
    },
}

/// Per-request timeout towards Pinfold and the Actions token endpoint.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A client for the tenant with a token, and where the token came from.
struct Session {
    creds: Credentials,
    remote: Remote,
    server: String,
    insecure_http: bool,
}

impl Session {
    /// Obtains a token (from the environment, or from the Actions runtime)
    /// and builds the client. No credential is `Unauthorised`.
    async fn open(args: &PublishArgs) -> Result<Session, Outcome> {
        let creds = if args.oidc.github_oidc {
            let audience = args.oidc.audience_for(&args.server);
            let runtime =
                ActionsRuntime::from_env().map_err(|e| Outcome::Unauthorised(e.to_string()))?;
            Credentials::Actions { runtime, audience }
        } else {
            Credentials::Static(
                Token::from_env(&args.token_env)
                    .map_err(|e| Outcome::Unauthorised(e.to_string()))?,
            )
        };
        let token = Self::token(&creds).await?;
        let remote = Remote::new(
            &args.server,
            &args.tenant,
            Some(token),
            REQUEST_TIMEOUT,
            args.insecure_http,
        )
        .map_err(|e| Outcome::Other(e.to_string()))?;
        Ok(Session {
            creds,
            remote,
            server: args.server.clone(),
            insecure_http: args.insecure_http,
        })
    }

    async fn token(creds: &Credentials) -> Result<Token, Outcome> {
        match creds {
            Credentials::Static(t) => Ok(t.clone()),
            Credentials::Actions { runtime, audience } => runtime
                .id_token(audience, REQUEST_TIMEOUT)
                .await
                .map_err(|e| Outcome::Unauthorised(e.to_string())),
        }
    }

    /// Asks the Actions runtime for a fresh token; `false` when the token
    /// does not come from there (nothing to refresh).
    async fn refresh(&mut self) -> Result<bool, Outcome> {
        if !matches!(self.creds, Credentials::Actions { .. }) {
            return Ok(false);
        }
        let token = Self::token(&self.creds).await?;
        self.remote = Remote::new(
            &self.server,
            self.remote.tenant(),
            Some(token),
            REQUEST_TIMEOUT,
            self.insecure_http,
        )
        .map_err(|e| Outcome::Other(e.to_string()))?;
        Ok(true)
    }
}

/// Runs `pinfold publish`; returns the exit code. The outcome goes to `out`,
/// progress and usage errors to `err`.
pub async fn run(
    args: PublishArgs,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> anyhow::Result<i32> {
    let (outcome, session) = match publish(&args, err).await {
        Ok(done) => done,
        Err(Usage(why)) => {
            writeln!(err, "pinfold: {why}")?;
            return Ok(exit::USAGE);
        }
    };
    let code = outcome.code();
    let (Outcome::Created(record) | Outcome::Identical(record), Some(mut session), true) =
        (&outcome, session, args.wait_approved)
    else {
        writeln!(out, "{}", outcome.line())?;
        out.flush()?;
        return Ok(code);
    };
    // One line on stdout, the final outcome: the publish itself is
    // progress while waiting.
    let _ = writeln!(err, "publish: {}", outcome.line());
    let waited = wait_approved(&mut session, record.clone(), args.timeout, err).await;
    writeln!(out, "{}", waited.line())?;
    out.flush()?;
    Ok(waited.code())
}

/// A usage error: reported on stderr, exit 2.
struct Usage(String);

/// The card read from the file: its bytes as given, and its name and
/// version (or every reason the card is invalid, found locally).
struct Card {
    bytes: Vec<u8>,
    name: String,
    version: String,
}

fn read_card(args: &PublishArgs) -> Result<Result<Card, Outcome>, Usage> {
    let shown = args.file.display().to_string();
    let bytes = if shown == "-" {
        let mut buf = Vec::new();
        std::io::stdin()
            .read_to_end(&mut buf)
            .map_err(|e| Usage(format!("cannot read stdin: {e}")))?;
        buf
    } else {
        std::fs::read(&args.file).map_err(|e| Usage(format!("cannot read {shown}: {e}")))?
    };
    let doc = pinfold_core::json::parse_strict(&bytes, pinfold_core::json::DEFAULT_MAX_DEPTH)
        .map_err(|e| Usage(format!("{shown} is not acceptable JSON: {e}")))?;
    let field = |k: &str| doc.get(k).and_then(Value::as_str).map(str::to_owned);
    match (field("name"), field("version")) {
        (Some(name), Some(version)) if !name.is_empty() && !version.is_empty() => Ok(Ok(Card {
            bytes,
            name,
            version,
        })),
        // Without a name and a version there is no URL to publish to: the
        // card is invalid, and core's own check says everything wrong with it.
        _ => {
            let errors = match pinfold_core::card::ServerCard::check(
                &doc,
                &pinfold_core::card::Limits::default(),
            ) {
                Err(e) => e
                    .errors
                    .into_iter()
                    .map(|f| (f.pointer, f.message))
                    .collect(),
                Ok(_) => vec![(
                    String::new(),
                    "the card needs a string name and version".to_owned(),
                )],
            };
            Ok(Err(Outcome::Invalid(errors)))
        }
    }
}

/// Reads the card, authenticates and publishes: the outcome, and the
/// session when one was opened (for `--wait-approved`).
async fn publish(
    args: &PublishArgs,
    err: &mut dyn Write,
) -> Result<(Outcome, Option<Session>), Usage> {
    let card = match read_card(args)? {
        Ok(c) => c,
        Err(invalid) => return Ok((invalid, None)),
    };
    // Check the URL before any credential is requested.
    Remote::new(
        &args.server,
        &args.tenant,
        None,
        REQUEST_TIMEOUT,
        args.insecure_http,
    )
    .map_err(|e| Usage(e.to_string()))?;
    let session = match Session::open(args).await {
        Ok(s) => s,
        Err(o) => return Ok((o, None)),
    };
    let remote = &session.remote;
    let url = remote.tenant_url(&["servers", &card.name, "versions", &card.version]);
    let sent = send(
        remote,
        Method::PUT,
        &url,
        Some(&card.bytes),
        HeaderMap::new(),
        err,
    )
    .await;
    let reply = match sent {
        Ok(r) => r,
        Err(o) => return Ok((o, None)),
    };
    let outcome = match reply.status {
        StatusCode::CREATED => Outcome::Created(record(&reply, &card)),
        StatusCode::OK => Outcome::Identical(record(&reply, &card)),
        StatusCode::CONFLICT if problem_code(&reply) == "version_exists" => {
            let p = reply.problem().unwrap_or_default();
            let digest = |k: &str| {
                p.extra
                    .get(k)
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_owned()
            };
            Outcome::Conflict {
                name: card.name.clone(),
                version: card.version.clone(),
                published: digest("existing_digest"),
                yours: digest("submitted_digest"),
            }
        }
        StatusCode::UNPROCESSABLE_ENTITY
        | StatusCode::PAYLOAD_TOO_LARGE
        | StatusCode::BAD_REQUEST => Outcome::Invalid(field_errors(&reply)),
        _ => classify_refusal(&reply, remote),
    };
    Ok((outcome, Some(session)))
}

/// Every `(pointer, message)` of a validation problem, or its detail.
fn field_errors(reply: &Reply) -> Vec<(String, String)> {
    let p = reply.problem().unwrap_or_default();
    let mut errors: Vec<(String, String)> = p
        .extra
        .get("errors")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .map(|e| {
                    let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
                    (s("pointer"), s("message"))
                })
                .collect()
        })
        .unwrap_or_default();
    if errors.is_empty() {
        errors.push((String::new(), describe(reply)));
    }
    errors
}

/// The answers other than success and the publish-specific ones.
fn classify_refusal(reply: &Reply, remote: &Remote) -> Outcome {
    match reply.status {
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => Outcome::Unauthorised(describe(reply)),
        StatusCode::NOT_FOUND if problem_code(reply) == "tenant_not_found" => {
            Outcome::Unauthorised(format!(
                "tenant {:?} does not exist or this token cannot see it ({})",
                remote.tenant(),
                describe(reply)
            ))
        }
        s if s.is_server_error() || retry::retryable_status(s) => {
            Outcome::Unreachable(describe(reply))
        }
        _ => Outcome::Other(format!("unexpected answer {}", describe(reply))),
    }
}

fn problem_code(reply: &Reply) -> String {
    reply.problem().map(|p| p.code).unwrap_or_default()
}

/// `403 forbidden_role: <detail>`, or the status alone.
fn describe(reply: &Reply) -> String {
    match reply.problem() {
        Some(p) if !p.code.is_empty() => {
            let detail = p.detail.filter(|d| !d.is_empty()).unwrap_or(p.title);
            format!("{} {}: {detail}", reply.status.as_u16(), p.code)
        }
        _ => reply.status.to_string(),
    }
}

/// The record in a reply, completed from the card where a field is missing.
fn record(reply: &Reply, card: &Card) -> Record {
    let mut r: Record = serde_json::from_slice(&reply.body).unwrap_or_default();
    if r.server.is_empty() {
        r.server.clone_from(&card.name);
    }
    if r.version.is_empty() {
        r.version.clone_from(&card.version);
    }
    r
}

/// One request with bounded retries; a transport failure or a 429/5xx that
/// outlasts them is `Unreachable`.
async fn send(
    remote: &Remote,
    method: Method,
    url: &url::Url,
    body: Option<&[u8]>,
    headers: HeaderMap,
    err: &mut dyn Write,
) -> Result<Reply, Outcome> {
    let policy = RetryPolicy::default();
    let label = format!(
        "{method} {}",
        crate::remote::without_credentials(url.as_str())
    );
    let outcome = retry::run(
        policy,
        || {
            remote.send(
                method.clone(),
                url.clone(),
                body.map(<[u8]>::to_vec),
                headers.clone(),
            )
        },
        |n, delay, why| {
            let _ = writeln!(
                err,
                "pinfold: {label}: {why}; retrying in {:.1}s (attempt {} of {})",
                delay.as_secs_f64(),
                n + 1,
                policy.attempts
            );
        },
    )
    .await;
    let tries = if outcome.attempts == 1 {
        String::new()
    } else {
        format!(" ({} attempts)", outcome.attempts)
    };
    match outcome.result {
        Ok(r) if retry::retryable_status(r.status) => Err(Outcome::Unreachable(format!(
            "{label}: {}{tries}",
            describe(&r)
        ))),
        Ok(r) => Ok(r),
        Err(RemoteError::Unreachable { url, reason }) => Err(Outcome::Unreachable(format!(
            "{method} {url}: {reason}{tries}"
        ))),
        Err(e) => Err(Outcome::Other(e.to_string())),
    }
}

/// First and longest pause between two polls while waiting for approval.
const POLL_FIRST: Duration = Duration::from_secs(1);
const POLL_MAX: Duration = Duration::from_secs(15);

/// Polls the version until approved, rejected/revoked/deprecated, or the
/// timeout; one stderr line per status change.
async fn wait_approved(
    session: &mut Session,
    mut rec: Record,
    timeout: Duration,
    err: &mut dyn Write,
) -> Outcome {
    let deadline = Instant::now() + timeout;
    let mut etag: Option<HeaderValue> = None;
    let mut pause = POLL_FIRST;
    let _ = writeln!(
        err,
        "pinfold: waiting up to {} for {} {} to be approved (now {})",
        show(timeout),
        rec.server,
        rec.version,
        rec.status
    );
    loop {
        match rec.status.as_str() {
            "approved" => return Outcome::Approved(rec),
            "rejected" | "revoked" | "deprecated" => return Outcome::NotApproved(rec),
            "pending" => {}
            other => return Outcome::Other(format!("unknown status {other:?}")),
        }
        let now = Instant::now();
        if now >= deadline {
            return Outcome::TimedOut(rec, timeout);
        }
        tokio::time::sleep(pause.min(deadline - now)).await;
        pause = pause.mul_f32(1.5).min(POLL_MAX);
        // One poll, with its retries and a token refresh, ends at the
        // deadline too: a Pinfold that stalls must not stretch `--timeout`
        // by the retries' worth of request timeouts.
        let poll = async {
            let mut refreshed = false;
            loop {
                let url =
                    session
                        .remote
                        .tenant_url(&["servers", &rec.server, "versions", &rec.version]);
                let mut headers = HeaderMap::new();
                if let Some(tag) = &etag {
                    headers.insert(IF_NONE_MATCH, tag.clone());
                }
                let reply =
                    send(&session.remote, Method::GET, &url, None, headers, &mut *err).await?;
                // An Actions ID token lives minutes: ask for a fresh one, once.
                if reply.status == StatusCode::UNAUTHORIZED && !refreshed {
                    refreshed = true;
                    if session.refresh().await? {
                        continue;
                    }
                }
                break Ok::<Reply, Outcome>(reply);
            }
        };
        let reply = match tokio::time::timeout_at(deadline.into(), poll).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(o)) => return o,
            Err(_) => return Outcome::TimedOut(rec, timeout),
        };
        match reply.status {
            StatusCode::NOT_MODIFIED => {}
            StatusCode::OK => {
                etag = reply.headers.get(ETAG).cloned();
                let before = std::mem::take(&mut rec.status);
                match serde_json::from_slice::<Record>(&reply.body) {
                    Ok(fresh) => rec = fresh,
                    Err(e) => {
                        return Outcome::Other(format!("the version record is not readable: {e}"));
                    }
                }
                if rec.status != before {
                    let _ = writeln!(
                        err,
                        "pinfold: {} {} is now {}",
                        rec.server, rec.version, rec.status
                    );
                }
            }
            _ => return classify_refusal(&reply, &session.remote),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units_and_bounds() {
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("10m").unwrap(), Duration::from_secs(600));
        assert_eq!(parse_duration("2h").unwrap(), Duration::from_secs(7200));
        assert_eq!(parse_duration("45").unwrap(), Duration::from_secs(45));
        for bad in ["", "m", "0s", "25h", "10 minutes", "1.5m", "-3s", "10d"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(show(Duration::from_secs(600)), "10m");
        assert_eq!(show(Duration::from_secs(90)), "90s");
        assert_eq!(show(Duration::from_secs(7200)), "2h");
    }

    fn rec(status: &str) -> Record {
        Record {
            server: "io.github.acme/files".into(),
            version: "1.0.0".into(),
            digest: "sha256:ab".into(),
            status: status.into(),
            ..Record::default()
        }
    }

    #[test]
    fn every_outcome_is_one_line_with_its_own_code() {
        let invalid = Outcome::Invalid(vec![
            (
                "/signature/tools/0/inputSchema".into(),
                "must be\nan object".into(),
            ),
            (String::new(), "bad".into()),
        ]);
        assert_eq!(
            invalid.line(),
            "invalid: /signature/tools/0/inputSchema: must be an object; (document): bad"
        );
        let conflict = Outcome::Conflict {
            name: "io.github.acme/files".into(),
            version: "1.0.0".into(),
            published: "sha256:a".into(),
            yours: "sha256:b".into(),
        };
        assert_eq!(
            conflict.line(),
            "conflict io.github.acme/files 1.0.0: published sha256:a, yours sha256:b"
        );
        assert_eq!(
            Outcome::Created(rec("pending")).line(),
            "created io.github.acme/files 1.0.0 sha256:ab (pending)"
        );
        let mut rejected = rec("rejected");
        rejected.status_reason = Some("too broad".into());
        rejected.reviews.push(ReviewEntry {
            reviewer: "rita".into(),
        });
        assert_eq!(
            Outcome::NotApproved(rejected).line(),
            "rejected io.github.acme/files 1.0.0 sha256:ab by rita: too broad"
        );
        assert_eq!(
            Outcome::TimedOut(rec("pending"), Duration::from_secs(120)).line(),
            "timeout io.github.acme/files 1.0.0 sha256:ab still pending after 2m"
        );
        let codes: Vec<i32> = [
            Outcome::Created(rec("pending")),
            Outcome::Identical(rec("approved")),
            Outcome::Approved(rec("approved")),
            Outcome::Other(String::new()),
            conflict,
            invalid,
            Outcome::Unauthorised(String::new()),
            Outcome::Unreachable(String::new()),
            Outcome::NotApproved(rec("revoked")),
            Outcome::TimedOut(rec("pending"), Duration::from_secs(1)),
        ]
        .iter()
        .map(Outcome::code)
        .collect();
        assert_eq!(codes, vec![0, 0, 0, 1, 3, 4, 5, 6, 7, 8]);
    }

    #[test]
    fn the_help_table_lists_every_code() {
        for code in [
            exit::OK,
            exit::OTHER,
            exit::USAGE,
            exit::CONFLICT,
            exit::INVALID,
            exit::UNAUTHORISED,
            exit::UNREACHABLE,
            exit::NOT_APPROVED,
            exit::TIMEOUT,
        ] {
            assert!(
                EXIT_CODES.contains(&format!("\n  {code}  ")),
                "exit code {code} missing from the help table"
            );
        }
    }
}
