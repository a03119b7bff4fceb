//! `pinfold capture` from arguments to exit code: check the arguments,
//! capture the live server, fold in the `--merge` files, and write the
//! draft card or the conflicts.

use std::io::Write;
use std::time::Duration;

use pinfold_core::card::{Limits, ServerCard};
use pinfold_core::draft::{self, Capture, Origin, Overrides, ServerInfo};
use pinfold_mcp_client::{ClientProfile, Negotiation};
use serde_json::{Value, json};

use super::args::{CaptureArgs, exit};
use super::lists::capture;
use super::merge::{MergeFile, load_merge_file};
use super::output::{conflict_lines, write_file, write_pretty};
use super::target::Target;
use crate::progress::Progress;

/// Runs `pinfold capture`; the card goes to `out` (or `--out`), everything
/// else to `progress`. Returns the exit code (see [`exit`]).
pub async fn run(
    args: CaptureArgs,
    out: &mut (dyn Write + Send),
    progress: &mut Progress<'_>,
) -> anyhow::Result<i32> {
    let usage = |progress: &mut Progress<'_>, msg: &str| {
        progress.line(&format!("pinfold capture: {msg}"));
        Ok(exit::USAGE)
    };
    if let Some(u) = &args.url
        && (!args.trailing.is_empty() || !u.contains("://"))
    {
        // A command where a URL belongs (`capture -- npx -y pkg`).
        let mut words = vec![u.as_str()];
        words.extend(args.trailing.iter().map(String::as_str));
        let command = shlex::try_join(words).unwrap_or_else(|_| u.clone());
        return usage(
            progress,
            &format!(
                "{u:?} is not an http:// or https:// URL; to start a local MCP server and capture it over stdio, use --command: pinfold capture --command {}",
                shlex::try_quote(&command).unwrap_or_else(|_| command.clone().into())
            ),
        );
    }
    let target = match (&args.url, &args.command) {
        (Some(u), _) => Some(Target::http(u, &args.headers)),
        (None, Some(c)) => Some(Target::stdio(c, &args.headers)),
        (None, None) => None,
    };
    let target = match target.transpose() {
        Ok(t) => t,
        Err(e) => return usage(progress, &e),
    };
    if target.is_none() {
        if args.merge.is_empty() {
            return usage(progress, "give a URL, --command, or --merge FILE...");
        }
        if !args.headers.is_empty() {
            return usage(progress, "--header needs a URL to send it to");
        }
    }
    if args.timeout == 0 {
        return usage(progress, "--timeout must be at least 1 second");
    }
    let profile = match ClientProfile::parse(&args.client_capabilities) {
        Ok(p) => p,
        Err(e) => return usage(progress, &e.to_string()),
    };
    let mut files = Vec::new();
    for p in &args.merge {
        match load_merge_file(p) {
            Ok(f) => files.push(f),
            Err(e) => return usage(progress, &e),
        }
    }
    let overrides = Overrides {
        name: args.name.clone(),
        version: args.version.clone(),
    };
    let limits = Limits::default();
    // Each --merge file on its own first: a bad file is a usage error.
    for f in &files {
        let one = Capture {
            label: f.label.clone(),
            base: f.base.to_owned(),
            lists: f.lists(),
        };
        if let Err(e) = draft::merge(&[one], &limits) {
            return usage(
                progress,
                &format!("{} is not a usable capture: {e}", f.label),
            );
        }
    }
    let captured = match &target {
        Some(t) => match capture(t, Duration::from_secs(args.timeout), &profile, progress).await {
            Ok(c) => Some(c),
            Err(e) => {
                progress.line(&format!("pinfold capture: {e}"));
                return Ok(exit::MCP_SERVER);
            }
        },
        None => None,
    };
    if let Some(c) = &captured {
        progress.line(&format!(
            "capture: client capabilities: {}",
            c.profile.describe()
        ));
        if let Negotiation::Fallback(why) = &c.negotiation {
            progress.line(&format!(
                "capture: {why}: the handshake fell back to initialize"
            ));
        }
        progress.line(&format!("capture: {}: {}", c.label, c.summary()));
        for n in &c.notes {
            progress.line(&format!("capture: note: {n}"));
        }
        if let Some(Target::Http { url, .. }) = &target
            && (url.query().is_some() || !url.username().is_empty() || url.password().is_some())
        {
            progress.line(
                "capture: note: the endpoint's credentials and query string are left out of the card",
            );
        }
    }
    let mut caps = Vec::new();
    if let Some(c) = &captured {
        caps.push(Capture {
            label: c.label.clone(),
            base: String::new(),
            lists: &c.lists,
        });
    }
    caps.extend(files.iter().map(|f| Capture {
        label: f.label.clone(),
        base: f.base.to_owned(),
        lists: f.lists(),
    }));
    let merged = match draft::merge(&caps, &limits) {
        Ok(m) => m,
        Err(e) => {
            // Every file merged on its own: the live lists are at fault.
            progress.line(&format!(
                "pinfold capture: the server's lists are not well formed: {e}"
            ));
            for err in e.errors.iter().take(20) {
                progress.line(&format!("  {} {}: {}", err.code, err.pointer, err.message));
            }
            return Ok(exit::MCP_SERVER);
        }
    };
    if !merged.is_clean() {
        for l in conflict_lines(&merged) {
            progress.line(&l);
        }
        write_pretty(out, &json!({"conflicts": merged.conflicts}))?;
        progress.line(&format!(
            "pinfold capture: {} conflict(s) between the captures; no card written",
            merged.conflicts.len()
        ));
        return Ok(exit::CONFLICT);
    }
    for n in &merged.notes {
        progress.line(&format!(
            "capture: note: the captures disagree on {} {} {} ({} values); kept {}",
            n.list, n.item, n.member, n.distinct, n.kept
        ));
    }
    let card = match &captured {
        Some(c) => match draft::identity(&c.server_info, &c.origin, &overrides) {
            Ok(id) => {
                for n in &id.notes {
                    progress.line(&format!("capture: note: {n}"));
                }
                if !id.notes.is_empty() {
                    progress.line(
                        "capture: note: pass --name and --version to choose the draft's identity",
                    );
                }
                draft::draft_card(&id, merged.signature)
            }
            Err(e) => return usage(progress, &format!("--name/--version: {e}")),
        },
        None => {
            let first_card = files.iter().find_map(MergeFile::card);
            match first_card {
                Some(card) => match draft::with_signature(card, merged.signature, &overrides) {
                    Ok(c) => c,
                    Err(e) => return usage(progress, &format!("--name/--version: {e}")),
                },
                None if overrides.name.is_some() && overrides.version.is_some() => {
                    match draft::identity(&ServerInfo::default(), &Origin::default(), &overrides) {
                        Ok(id) => draft::draft_card(&id, merged.signature),
                        Err(e) => return usage(progress, &format!("--name/--version: {e}")),
                    }
                }
                None => {
                    return usage(
                        progress,
                        "none of the --merge files is a card: pass --name and --version for the draft",
                    );
                }
            }
        }
    };
    // The capability profiles the lists were captured under: this
    // capture's and those the --merge cards record.
    let mut profiles: Vec<Value> = captured.iter().map(|c| c.profile.record()).collect();
    for f in &files {
        for p in f.card().map(recorded_profiles).unwrap_or_default() {
            if !profiles.contains(&p) {
                profiles.push(p);
            }
        }
    }
    // Which server the lists came from (serverInfo as sent), for verify
    // to notice a different one: this capture's, else the first card's.
    let server_info = match &captured {
        Some(c) => c
            .reported_name
            .as_ref()
            .map(|n| json!({"name": n, "version": c.server_info.version})),
        None => files
            .iter()
            .filter_map(MergeFile::card)
            .find_map(recorded_server_info),
    };
    let card = with_capture_meta(card, profiles, server_info);
    let verdict = ServerCard::from_value(&card, &limits);
    match &args.out {
        Some(path) => {
            if let Err(e) = write_file(path, &card) {
                progress.line(&format!(
                    "pinfold capture: cannot write {}: {e}",
                    path.display()
                ));
                return Ok(exit::USAGE);
            }
        }
        None => write_pretty(out, &card)?,
    }
    let whereto = args
        .out
        .as_ref()
        .map_or("stdout".to_owned(), |p| p.display().to_string());
    match verdict {
        Ok(c) => {
            let tools = c.signature.tools.len();
            progress.line(&format!(
                "capture: wrote the draft card {} {} to {whereto} ({tools} {}; digest {})",
                c.name,
                c.version,
                if tools == 1 { "tool" } else { "tools" },
                c.digest()
            ));
            Ok(exit::OK)
        }
        Err(e) => {
            progress.line(&format!(
                "pinfold capture: the draft written to {whereto} does not pass the registry's validation ({} problem(s)):",
                e.errors.len()
            ));
            for err in e.errors.iter().take(20) {
                progress.line(&format!("  {} {}: {}", err.code, err.pointer, err.message));
            }
            Ok(exit::INVALID_DRAFT)
        }
    }
}

/// The `_meta` key under which a draft card records how it was captured.
pub const CAPTURE_META: &str = "io.github.pinfold/capture";

/// The profiles a card records (`_meta["io.github.pinfold/capture"]
/// .clientCapabilities`), none when it records none.
pub fn recorded_profiles(card: &serde_json::Map<String, Value>) -> Vec<Value> {
    card.get("_meta")
        .and_then(|m| m.get(CAPTURE_META))
        .and_then(|c| c.get("clientCapabilities"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// The `serverInfo` a card records (`{"name", "version"}` as the server
/// sent them), if any.
pub fn recorded_server_info(card: &serde_json::Map<String, Value>) -> Option<Value> {
    card.get("_meta")
        .and_then(|m| m.get(CAPTURE_META))
        .and_then(|c| c.get("serverInfo"))
        .filter(|v| v.get("name").is_some_and(Value::is_string))
        .cloned()
}

/// `card` recording how it was captured: under `profiles`, from the
/// server `server_info` names (the card's other `_meta` members kept).
fn with_capture_meta(mut card: Value, profiles: Vec<Value>, server_info: Option<Value>) -> Value {
    let mut record = serde_json::Map::new();
    if !profiles.is_empty() {
        record.insert("clientCapabilities".into(), Value::Array(profiles));
    }
    if let Some(i) = server_info {
        record.insert("serverInfo".into(), i);
    }
    if record.is_empty() {
        return card;
    }
    if let Some(obj) = card.as_object_mut() {
        let meta = obj
            .entry("_meta")
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        if let Some(m) = meta.as_object_mut() {
            m.insert(CAPTURE_META.to_owned(), Value::Object(record));
        }
    }
    card
}
