//! `pinfold guard`: runs a local MCP server over stdio under the signature
//! Pinfold approved for it, for desktop clients that start their servers
//! by command (Claude Desktop, VS Code, Cursor). The client starts
//! `pinfold guard … -- COMMAND ARGS`; the guard starts COMMAND in a
//! process group of its own and stands between the two pipes:
//!
//! - the client is shown the reviewed tools (the signature's worst case),
//!   never what the server added or changed after review;
//! - calls to tools that are not shown, and arguments outside the reviewed
//!   schema, are answered by the guard and never reach the server;
//! - prompts and resources are cut to the signature the same way.
//!
//! The rules are core's ([`pinfold_core::guard`]); [`proxy`] applies them
//! to messages. The approved card is read from Pinfold
//! (`GET /v1/tenants/{t}/servers/{name}/versions/{version}` and its
//! `/card`), revalidated with its ETag on every start, and kept on disk, so
//! the guard starts with the last approved signature when Pinfold cannot
//! be reached. Without an approved signature it refuses to start under
//! `strict`.
//!
//! stdout carries only the MCP messages; everything the guard has to say
//! goes to stderr, which MCP clients show in their server logs.

pub mod proxy;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use pinfold_core::Mode;
use pinfold_core::card::{Limits, ServerCard, Signature};
use pinfold_core::guard::CallsPolicy;
use pinfold_core::names::ServerName;
use pinfold_mcp_client::stdio::{StopTimes, spawn};
use reqwest::Method;
use reqwest::header::{ETAG, HeaderMap, HeaderValue, IF_NONE_MATCH};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, AsyncWrite, AsyncWriteExt as _, BufReader};

use crate::remote::{Remote, RemoteError, Reply, Token};
use proxy::{Out, Proxy, rpc_error};

/// Exit codes of `pinfold guard`.
pub mod exit {
    /// The client closed the connection.
    pub const OK: i32 = 0;
    /// Bad arguments.
    pub const USAGE: i32 = 2;
    /// The MCP server could not be started, or ended before the client.
    pub const MCP_SERVER: i32 = 3;
    /// Pinfold could not be reached and no signature is cached.
    pub const PINFOLD_UNREACHABLE: i32 = 4;
    /// Pinfold refused the token (or there is none).
    pub const UNAUTHORIZED: i32 = 5;
    /// No approved signature, under `strict`.
    pub const NO_SIGNATURE: i32 = 6;
}

const EXIT_CODES: &str = "\
Exit codes:
  0  the client closed the connection
  2  bad arguments
  3  the MCP server could not be started, or ended before the client
  4  Pinfold could not be reached and no signature is cached
  5  Pinfold refused the token, or the token variable is unset
  6  there is no approved signature and the mode is strict

Client configuration (Claude Desktop, claude_desktop_config.json):
  \"command\": \"pinfold\",
  \"args\": [\"guard\", \"--url\", \"https://pinfold.example\", \"--tenant\", \"acme\",
           \"--server\", \"io.github.acme/notes\", \"--\", \"npx\", \"-y\", \"notes-mcp\"],
  \"env\": {\"PINFOLD_TOKEN\": \"...\"}";

/// `pinfold guard`.
#[derive(Debug, Clone, clap::Args)]
#[command(disable_version_flag = true, after_help = EXIT_CODES)]
pub struct GuardArgs {
    /// Pinfold's base URL, e.g. https://pinfold.example.
    #[arg(long, value_name = "PINFOLD_URL")]
    pub url: String,
    /// The tenant.
    #[arg(long)]
    pub tenant: String,
    /// The server's registry name ("namespace/name").
    #[arg(long, value_name = "NAME")]
    pub server: String,
    /// The approved version to enforce (exact, or latest: the highest
    /// approved, read again at every start).
    #[arg(long, default_value = "latest")]
    pub version: String,
    /// strict (drifted and undeclared tools are withheld and refused),
    /// permissive (shown, flagged) or advisory (shown; noted on stderr).
    #[arg(long, default_value = "strict")]
    pub mode: String,
    /// Which calls go through, decided on each call's annotations (the
    /// reviewed worst case, or for a resolvable tool the server's
    /// resolution of the call, checked against the signature): all,
    /// non_destructive or read_only.
    #[arg(long, default_value = "all")]
    pub calls: String,
    /// The environment variable holding the bearer token for Pinfold.
    #[arg(long, value_name = "VAR", default_value = "PINFOLD_TOKEN")]
    pub token_env: String,
    /// Where approved signatures are kept between runs [default:
    /// $XDG_CACHE_HOME/pinfold/guard, or ~/.cache/pinfold/guard].
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Allow a plain http:// --url that is not this machine.
    #[arg(long)]
    pub insecure_http: bool,
    /// Seconds to wait for Pinfold.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    pub timeout: u64,
    /// The MCP server's command and its arguments, after `--`.
    #[arg(required = true, last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// A failure before the server starts: its exit code and one line.
struct Stop(i32, String);

/// What is kept on disk of an approved version.
#[derive(Debug, Serialize, Deserialize)]
struct Cached {
    /// The version asked for (`latest` or exact).
    asked: String,
    etag: Option<String>,
    version: String,
    digest: String,
    card: Value,
}

/// Limits under which the approved card is read: Pinfold checked it
/// under its own when it was published.
fn card_limits() -> Limits {
    Limits {
        max_document_bytes: 16 << 20,
        ..Limits::default()
    }
}

fn cache_dir(args: &GuardArgs) -> Option<PathBuf> {
    if let Some(d) = &args.cache_dir {
        return Some(d.clone());
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("pinfold").join("guard"))
}

/// One file per Pinfold, tenant, server and version asked for.
fn cache_file(dir: &Path, args: &GuardArgs) -> PathBuf {
    let safe = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    let host = url::Url::parse(&args.url)
        .ok()
        .map(|u| {
            format!(
                "{}_{}",
                u.host_str().unwrap_or(""),
                u.port_or_known_default().unwrap_or(0)
            )
        })
        .unwrap_or_default();
    dir.join(format!(
        "{}__{}__{}__{}.json",
        safe(&host),
        safe(&args.tenant),
        safe(&args.server),
        safe(&args.version)
    ))
}

/// The cached version, when its card still has the digest it was
/// approved under (a file edited by hand is not used).
fn read_cache(path: &Path, asked: &str) -> Option<Cached> {
    let bytes = std::fs::read(path).ok()?;
    let c: Cached = serde_json::from_slice(&bytes).ok()?;
    let card = ServerCard::from_value(&c.card, &card_limits()).ok()?;
    (c.asked == asked && card.digest() == c.digest).then_some(c)
}

fn write_cache(path: &Path, c: &Cached) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec(c)?)?;
    std::fs::rename(tmp, path)
}

fn problem_text(reply: &Reply) -> String {
    match reply.problem() {
        Some(p) => format!(
            "{} ({}){}",
            p.title,
            p.code,
            p.detail.map(|d| format!(": {d}")).unwrap_or_default()
        ),
        None => format!("HTTP {}", reply.status),
    }
}

/// The approved signature: from Pinfold (revalidated against the cache),
/// or from the cache when Pinfold cannot be reached. `Ok(None)`: Pinfold
/// says there is none.
async fn approved(
    args: &GuardArgs,
    remote: &Remote,
    cache: Option<&Path>,
    note: &mut dyn FnMut(String),
) -> Result<Option<Cached>, Stop> {
    let cached = cache.and_then(|p| read_cache(p, &args.version));
    let mut offline = |why: String, cached: Option<Cached>| match cached {
        Some(c) => {
            note(format!(
                "pinfold guard: {why}; enforcing the cached {} {} ({})",
                args.server, c.version, c.digest
            ));
            Ok(Some(c))
        }
        None => Err(Stop(
            exit::PINFOLD_UNREACHABLE,
            format!(
                "{why}, and no approved signature of {} is cached",
                args.server
            ),
        )),
    };
    let mut headers = HeaderMap::new();
    if let Some(tag) = cached.as_ref().and_then(|c| c.etag.as_deref())
        && let Ok(v) = HeaderValue::from_str(tag)
    {
        headers.insert(IF_NONE_MATCH, v);
    }
    let url = remote.tenant_url(&["servers", &args.server, "versions", &args.version]);
    let reply = match remote.send(Method::GET, url, None, headers).await {
        Ok(r) => r,
        Err(e) => return offline(format!("Pinfold: {e}"), cached),
    };
    match reply.status.as_u16() {
        304 if cached.is_some() => {
            note(format!(
                "pinfold guard: {} {}: unchanged since it was cached (ETag)",
                args.server, args.version
            ));
            return Ok(cached);
        }
        200 => {}
        401 | 403 => {
            return Err(Stop(
                exit::UNAUTHORIZED,
                format!("Pinfold refused the token: {}", problem_text(&reply)),
            ));
        }
        404 | 409 | 410 => {
            note(format!(
                "pinfold guard: no approved {} {} in tenant {}: {}",
                args.server,
                args.version,
                args.tenant,
                problem_text(&reply)
            ));
            return Ok(None);
        }
        _ => {
            return offline(format!("Pinfold answered {}", problem_text(&reply)), cached);
        }
    }
    let record = reply.json().unwrap_or(Value::Null);
    let field = |k: &str| record.get(k).and_then(Value::as_str).map(str::to_owned);
    let (Some(version), Some(digest), Some(status)) =
        (field("version"), field("digest"), field("status"))
    else {
        return offline(
            "Pinfold's version record lacks version, digest or status".into(),
            cached,
        );
    };
    if !matches!(status.as_str(), "approved" | "deprecated") {
        note(format!(
            "pinfold guard: {} {version} is {status}, not approved",
            args.server
        ));
        return Ok(None);
    }
    let etag = reply
        .headers
        .get(ETAG)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let card = match cached {
        Some(c) if c.digest == digest => c.card,
        _ => {
            let url = remote.tenant_url(&["servers", &args.server, "versions", &version, "card"]);
            let reply = match remote.send(Method::GET, url, None, HeaderMap::new()).await {
                Ok(r) => r,
                Err(e) => return Err(Stop(exit::PINFOLD_UNREACHABLE, format!("Pinfold: {e}"))),
            };
            if !reply.status.is_success() {
                return Err(Stop(
                    exit::PINFOLD_UNREACHABLE,
                    format!(
                        "reading the card of {} {version}: {}",
                        args.server,
                        problem_text(&reply)
                    ),
                ));
            }
            reply.json().unwrap_or(Value::Null)
        }
    };
    match ServerCard::from_value(&card, &card_limits()) {
        Ok(c) if c.digest() == digest => {}
        _ => {
            return Err(Stop(
                exit::PINFOLD_UNREACHABLE,
                format!(
                    "the card Pinfold sent for {} {version} does not have the approved digest",
                    args.server
                ),
            ));
        }
    }
    let fresh = Cached {
        asked: args.version.clone(),
        etag,
        version,
        digest,
        card,
    };
    if let Some(p) = cache
        && let Err(e) = write_cache(p, &fresh)
    {
        note(format!(
            "pinfold guard: cannot keep the signature in {}: {e}",
            p.display()
        ));
    }
    Ok(Some(fresh))
}

/// Writes one message and a newline, and flushes.
async fn send<W: AsyncWrite + Unpin>(w: &mut W, v: &Value) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(v).map_err(std::io::Error::other)?;
    line.push(b'\n');
    w.write_all(&line).await?;
    w.flush().await
}

/// Runs `pinfold guard`; notes and errors go to `err`. Returns the exit
/// code (see [`exit`]).
pub async fn run(args: GuardArgs, err: &mut (dyn Write + Send)) -> anyhow::Result<i32> {
    let mut note = |s: String| {
        let _ = writeln!(err, "{s}");
    };
    match prepare(&args, &mut note).await {
        Ok(proxy) => serve(&args, proxy, &mut note).await,
        Err(Stop(code, msg)) => {
            note(format!("pinfold guard: {msg}"));
            Ok(code)
        }
    }
}

async fn prepare(args: &GuardArgs, note: &mut dyn FnMut(String)) -> Result<Proxy, Stop> {
    let usage = |m: String| Stop(exit::USAGE, m);
    let mode: Mode = args.mode.parse().map_err(|_| {
        usage(format!(
            "--mode {:?}: use strict, permissive or advisory",
            args.mode
        ))
    })?;
    let calls: CallsPolicy = args
        .calls
        .parse()
        .map_err(|e| usage(format!("--calls: {e}")))?;
    ServerName::parse(&args.server)
        .map_err(|e| usage(format!("--server {:?}: {e}", args.server)))?;
    if args.version.trim().is_empty() {
        return Err(usage("--version must not be empty".into()));
    }
    if args.timeout == 0 {
        return Err(usage("--timeout must be at least 1 second".into()));
    }
    let timeout = Duration::from_secs(args.timeout);
    let unreachable = |e: RemoteError| match e {
        RemoteError::NoToken(_) => Stop(exit::UNAUTHORIZED, e.to_string()),
        _ => Stop(exit::USAGE, e.to_string()),
    };
    // The URL is checked before the token is read.
    Remote::new(&args.url, &args.tenant, None, timeout, args.insecure_http).map_err(unreachable)?;
    let token = Token::from_env(&args.token_env).map_err(unreachable)?;
    let remote = Remote::new(
        &args.url,
        &args.tenant,
        Some(token),
        timeout,
        args.insecure_http,
    )
    .map_err(unreachable)?;
    let cache = cache_dir(args).map(|d| cache_file(&d, args));
    let found = approved(args, &remote, cache.as_deref(), note).await?;
    let limits = card_limits();
    let proxy = match found {
        Some(c) => {
            let sig = ServerCard::from_value(&c.card, &limits)
                .map_err(|_| {
                    Stop(
                        exit::PINFOLD_UNREACHABLE,
                        "the approved card cannot be read".into(),
                    )
                })?
                .signature;
            note(format!(
                "pinfold guard: enforcing {} {} ({}) under {mode}, calls {calls}",
                args.server,
                c.version,
                c.digest,
                mode = mode.as_str()
            ));
            Proxy::new(sig, Some(&c.card), mode, calls, limits)
        }
        None if mode == Mode::Strict => {
            return Err(Stop(
                exit::NO_SIGNATURE,
                format!(
                    "no approved signature of {}: under strict nothing would be reviewed, so the \
                     server is not started (approve a version, or use --mode permissive to run \
                     it with every tool flagged)",
                    args.server
                ),
            ));
        }
        None => {
            note(format!(
                "pinfold guard: no approved signature of {}; every tool is undeclared ({})",
                args.server,
                mode.as_str()
            ));
            Proxy::new(Signature::default(), None, mode, calls, limits)
        }
    };
    Ok(proxy)
}

/// Largest message accepted on either pipe (a line).
const MAX_LINE: usize = 16 << 20;

async fn serve(
    args: &GuardArgs,
    mut proxy: Proxy,
    note: &mut dyn FnMut(String),
) -> anyhow::Result<i32> {
    let (program, rest) = args
        .command
        .split_first()
        .ok_or_else(|| anyhow::anyhow!("no command after --"))?;
    let (server, pipes) = match spawn(program, rest) {
        Ok(s) => s,
        Err(e) => {
            note(format!("pinfold guard: cannot start {program:?}: {e}"));
            return Ok(exit::MCP_SERVER);
        }
    };
    let mut from_client = BufReader::new(tokio::io::stdin());
    let mut from_server = BufReader::new(pipes.stdout);
    let mut to_server = pipes.stdin;
    let mut to_client = tokio::io::stdout();
    let mut client_line = Vec::new();
    let mut server_line = Vec::new();
    let code = loop {
        let outs = tokio::select! {
            r = read_line(&mut from_client, &mut client_line) => match r {
                Ok(true) => match take_message(&mut client_line) {
                    None => Vec::new(),
                    Some(Ok(m)) => proxy.from_client(m),
                    Some(Err(e)) => vec![Out::Client(
                        serde_json::json!({"jsonrpc": "2.0", "id": null, "error": e}),
                    )],
                },
                Ok(false) => break exit::OK,
                Err(e) => {
                    note(format!("pinfold guard: reading from the client: {e}"));
                    break exit::OK;
                }
            },
            r = read_line(&mut from_server, &mut server_line) => match r {
                Ok(true) => match take_message(&mut server_line) {
                    None => Vec::new(),
                    Some(Ok(m)) => proxy.from_server(m),
                    Some(Err(_)) => vec![Out::Note(
                        "pinfold guard: the server wrote a line that is not JSON; dropped".into(),
                    )],
                },
                Ok(false) => {
                    let tail = server.stderr_tail();
                    note(format!(
                        "pinfold guard: the MCP server ended{}",
                        if tail.is_empty() { String::new() } else { format!(": {tail}") }
                    ));
                    break exit::MCP_SERVER;
                }
                Err(e) => {
                    note(format!("pinfold guard: reading from the server: {e}"));
                    break exit::MCP_SERVER;
                }
            },
        };
        for o in outs {
            match o {
                Out::Client(v) => {
                    if send(&mut to_client, &v).await.is_err() {
                        // The client is gone.
                        server.stop(StopTimes::default()).await;
                        return Ok(exit::OK);
                    }
                }
                Out::Server(v) => {
                    if let Err(e) = send(&mut to_server, &v).await {
                        note(format!("pinfold guard: writing to the server: {e}"));
                    }
                }
                Out::Note(n) => note(n),
            }
        }
    };
    drop(to_server);
    server.stop(StopTimes::default()).await;
    Ok(code)
}

/// Reads one line into `buf` (without its newline); `false` at the end of
/// the input. A line longer than [`MAX_LINE`] is an error.
async fn read_line<R: tokio::io::AsyncBufRead + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
) -> std::io::Result<bool> {
    buf.clear();
    loop {
        let available = r.fill_buf().await?;
        if available.is_empty() {
            return Ok(!buf.is_empty());
        }
        match available.iter().position(|&b| b == b'\n') {
            Some(i) => {
                buf.extend_from_slice(&available[..i]);
                r.consume(i + 1);
                return Ok(true);
            }
            None => {
                let n = available.len();
                buf.extend_from_slice(available);
                r.consume(n);
            }
        }
        if buf.len() > MAX_LINE {
            return Err(std::io::Error::other(format!(
                "a message longer than {MAX_LINE} bytes"
            )));
        }
    }
}

/// Parses a line as one JSON message (the JSON-RPC parse error when it is
/// not JSON); `None` for a blank line.
fn take_message(line: &mut Vec<u8>) -> Option<Result<Value, Value>> {
    let text = std::mem::take(line);
    if text.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    Some(serde_json::from_slice(&text).map_err(|e| rpc_error(-32700, &format!("Parse error: {e}"))))
}
