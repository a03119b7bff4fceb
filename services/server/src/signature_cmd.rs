//! `pinfold signature digest|reduce|verify|diff`: the core semantics offline,
//! for CI pipelines. Output is JSON on stdout in the same shapes as the HTTP
//! API. Exit codes: 0 success, 1 not conformant (`verify` under a mode that
//! fails) or, for `diff --fail-on`, a change at the threshold, 2 unreadable
//! or invalid input (with a one-line reason on stderr and, for invalid
//! documents, `{"errors": [...]}` on stdout).

use std::io::{Read as _, Write};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::{Args, Subcommand};
use pinfold_core::Mode;
use pinfold_core::diff::Class;
use pinfold_core::error::ValidationErrors;
use serde::Serialize;
use serde_json::Value;

/// `pinfold signature ...`.
#[derive(Debug, Clone, Subcommand)]
pub enum SignatureCommand {
    /// Print the canonical digest (sha256:<hex>) of a server card with its signature.
    Digest(OneFile),
    /// Print the worst-case `tools/list` view ({"tools": [...]}) of a server card.
    Reduce(OneFile),
    /// Check an observed document (a tools/list result, or any of tools/prompts/resources/resourceTemplates) against a signature; exit 1 when not conformant.
    Verify(VerifyArgs),
    /// Print the capability diff between two versions of a server card; with --fail-on, exit 1 on a change at the threshold.
    #[command(after_help = DIFF_EXIT_CODES)]
    Diff(DiffArgs),
}

/// One input file.
#[derive(Debug, Clone, Args)]
pub struct OneFile {
    /// The server card (the document one publishes); `-` reads stdin.
    pub file: PathBuf,
}

/// `verify` arguments.
#[derive(Debug, Clone, Args)]
pub struct VerifyArgs {
    /// The server card with its signature; `-` reads stdin.
    pub signature: PathBuf,
    /// What a client observed (tools/list result or {tools, prompts, resources, resourceTemplates}).
    pub observed: PathBuf,
    /// strict, permissive (default) or advisory. Exit 1 on violations unless advisory.
    #[arg(long, default_value = "permissive")]
    pub mode: String,
}

const DIFF_EXIT_CODES: &str = "\
Each change is classed escalation (something less safe became possible),
incompatible (not less safe, but a server showing it fails `pinfold verify`
against the old version: a schema changed, ...), reduction or neutral; the
diff's classification is the most serious.

Exit codes:
  0  printed; no change at the --fail-on threshold (always, without --fail-on)
  1  --fail-on escalation: the diff has an escalation;
     --fail-on change: it has a change that is not neutral (escalation,
     incompatible or reduction)
  2  a file cannot be read or is not a valid server card";

/// `diff` arguments.
#[derive(Debug, Clone, Args)]
pub struct DiffArgs {
    /// The older server card.
    pub old: PathBuf,
    /// The newer server card.
    pub new: PathBuf,
    /// Exit 1 when the diff has an escalation (`escalation`), or any change
    /// that is not neutral (`change`).
    #[arg(long, value_name = "escalation|change")]
    pub fail_on: Option<FailOn>,
}

/// What `diff --fail-on` fails on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FailOn {
    /// Something less safe became possible.
    Escalation,
    /// Any change that is not neutral.
    Change,
}

impl FailOn {
    /// Whether a diff of this classification fails.
    pub fn fails(self, classification: Class) -> bool {
        match self {
            FailOn::Escalation => classification == Class::Escalation,
            FailOn::Change => classification != Class::Neutral,
        }
    }
}

/// Why a `signature` command failed before producing its result.
#[derive(Debug)]
pub enum Failure {
    /// The input could not be read or parsed (one-line reason).
    Input(String),
    /// The document is not a valid server card / observation.
    Invalid(ValidationErrors),
    /// Stdout could not be written (a closed pipe ends the command
    /// quietly, never as a usage error).
    Output(anyhow::Error),
}

fn read_json(path: &Path) -> Result<Value, Failure> {
    let bytes = if path == Path::new("-") {
        let mut buf = Vec::new();
        std::io::stdin()
            .read_to_end(&mut buf)
            .map_err(|e| Failure::Input(format!("cannot read stdin: {e}")))?;
        buf
    } else {
        std::fs::read(path)
            .map_err(|e| Failure::Input(format!("cannot read {}: {e}", path.display())))?
    };
    pinfold_core::json::parse_strict(&bytes, pinfold_core::json::DEFAULT_MAX_DEPTH)
        .map_err(|e| Failure::Input(format!("{} is not acceptable JSON: {e}", path.display())))
}

fn pretty<T: Serialize>(out: &mut dyn Write, value: &T) -> anyhow::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)?;
    Ok(())
}

/// Runs one command, writing JSON to `out`; returns the exit code.
pub fn run(cmd: SignatureCommand, out: &mut dyn Write, err: &mut dyn Write) -> anyhow::Result<i32> {
    let result: Result<i32, Failure> = (|| match cmd {
        SignatureCommand::Digest(a) => {
            let doc = read_json(&a.file)?;
            let report = pinfold_core::ops::digest_document(&doc).map_err(Failure::Invalid)?;
            pretty(out, &report).map_err(Failure::Output)?;
            Ok(0)
        }
        SignatureCommand::Reduce(a) => {
            let doc = read_json(&a.file)?;
            let tools = pinfold_core::ops::reduce_document(&doc).map_err(Failure::Invalid)?;
            pretty(out, &tools).map_err(Failure::Output)?;
            Ok(0)
        }
        SignatureCommand::Verify(a) => {
            let mode: Mode = a.mode.parse().map_err(|_| {
                Failure::Input(format!(
                    "--mode {:?}: use strict, permissive or advisory",
                    a.mode
                ))
            })?;
            let sig = read_json(&a.signature)?;
            let observed = read_json(&a.observed)?;
            let report =
                pinfold_core::ops::verify(&sig, &observed, mode).map_err(Failure::Invalid)?;
            pretty(out, &report).map_err(Failure::Output)?;
            Ok(if report.fails() { 1 } else { 0 })
        }
        SignatureCommand::Diff(a) => {
            let old = read_json(&a.old)?;
            let new = read_json(&a.new)?;
            let diff = pinfold_core::ops::diff(&old, &new).map_err(Failure::Invalid)?;
            pretty(out, &diff).map_err(Failure::Output)?;
            Ok(match a.fail_on {
                Some(f) if f.fails(diff.classification) => 1,
                _ => 0,
            })
        }
    })();
    match result {
        Ok(code) => Ok(code),
        Err(Failure::Output(e)) => Err(e),
        Err(Failure::Input(reason)) => {
            writeln!(err, "pinfold: {reason}").context("writing stderr")?;
            Ok(2)
        }
        Err(Failure::Invalid(errors)) => {
            pretty(out, &errors)?;
            let first = errors
                .errors
                .first()
                .map(|e| format!("{} at {:?}", e.message, e.pointer))
                .unwrap_or_default();
            writeln!(
                err,
                "pinfold: invalid document: {} error(s); first: {first}",
                errors.errors.len()
            )?;
            Ok(2)
        }
    }
}
