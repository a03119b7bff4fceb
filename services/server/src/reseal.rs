//! `pinfold keys reseal`: moves every stored secret under the current
//! encryption key, so that old keys can be removed from the configuration.
//!
//! It visits the tenants in order and, for each, every sealed column
//! ([`SealedColumn::ALL`]) in pages of `batch_size` values: each value is
//! opened with the configured keys (current, old, or as a legacy value
//! without a key id) for the tenant and context it is bound to, and, unless
//! it is already under the current key, sealed again under it. A page's new
//! values are written in one transaction, each only while its row still
//! holds the value that was read (a secret the server rewrote meanwhile is
//! left as it is). Running it again re-seals nothing more: it is idempotent.
//! On PostgreSQL it runs as the server does, as the runtime role under
//! row-level security, each tenant in transactions bound to that tenant.
//!
//! A value that does not open is counted, named (tenant, column, row key;
//! never the value) and left as it is; the command then fails.

use std::collections::BTreeMap;
use std::io::Write;

use pinfold_core::ids::TenantId;
use pinfold_registry::keys::{Keyring, Resealed, key_id_of};
use pinfold_store_rows::{Replacement, SealedColumn};

use crate::store::Store;

/// How to re-seal.
#[derive(Debug, Clone, Copy)]
pub struct ResealOptions {
    /// Values read (and written) per page, and tenants listed per page.
    pub batch_size: u32,
    /// Only count: open every value, write nothing.
    pub dry_run: bool,
}

impl Default for ResealOptions {
    fn default() -> Self {
        Self {
            batch_size: 500,
            dry_run: false,
        }
    }
}

/// What happened to the values of one column (or of all).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Sealed again under the current key (with `dry_run`: would be).
    pub resealed: u64,
    /// Already under the current key.
    pub current: u64,
    /// Opened with none of the configured keys (left as they are).
    pub unopenable: u64,
    /// Rewritten by the server between read and write (left as they are:
    /// a replica seals under its current key).
    pub changed: u64,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.resealed += o.resealed;
        self.current += o.current;
        self.unopenable += o.unopenable;
        self.changed += o.changed;
    }

    fn seen(&self) -> u64 {
        self.resealed + self.current + self.unopenable + self.changed
    }
}

/// The outcome of a whole run.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// Tenants visited.
    pub tenants: u64,
    /// Per sealed column, in [`SealedColumn::ALL`] order.
    pub columns: Vec<(SealedColumn, Counts)>,
    /// How many values were found under each key id (`legacy`: without
    /// one), before re-sealing.
    pub by_key: BTreeMap<String, u64>,
}

impl Summary {
    /// The counts of every column together.
    pub fn total(&self) -> Counts {
        let mut t = Counts::default();
        for (_, c) in &self.columns {
            t.add(c);
        }
        t
    }

    fn column(&mut self, column: SealedColumn) -> &mut Counts {
        let i = match self.columns.iter().position(|(c, _)| *c == column) {
            Some(i) => i,
            None => {
                self.columns.push((column, Counts::default()));
                self.columns.len() - 1
            }
        };
        &mut self.columns[i].1
    }
}

/// The context a value of `column` in row `key` is sealed for (`None`: a
/// tenant's own secret), as the service that sealed it computes it.
fn context_of(column: SealedColumn, key: &str) -> Option<String> {
    match column {
        SealedColumn::AttestationKey => None,
        SealedColumn::UpstreamHeaders => Some(pinfold_resolve::headers_context(key).to_owned()),
        SealedColumn::ClientSecret => Some(pinfold_scope::secret_context(key)),
        SealedColumn::PkceVerifier => Some(pinfold_scope::verifier_context(key)),
        SealedColumn::GuardHeaders => Some(pinfold_guard::model::headers_context(key)),
    }
}

/// Re-seals every stored secret under `keyring`'s current key, writing
/// progress (one line per tenant, one per value that does not open) and
/// the summary to `out`.
pub async fn reseal(
    store: &Store,
    keyring: &Keyring,
    opts: ResealOptions,
    out: &mut (dyn Write + Send),
) -> anyhow::Result<Summary> {
    anyhow::ensure!(opts.batch_size > 0, "the batch size must be at least 1");
    let old: Vec<&str> = keyring.old_kids().collect();
    writeln!(
        out,
        "{} every sealed value under encryption key {} (old keys: {}){}",
        if opts.dry_run {
            "Checking"
        } else {
            "Re-sealing"
        },
        keyring.current_kid(),
        if old.is_empty() {
            "none".to_owned()
        } else {
            old.join(", ")
        },
        if opts.dry_run {
            "; dry run, nothing is written"
        } else {
            ""
        }
    )?;
    let mut summary = Summary::default();
    for column in SealedColumn::ALL {
        summary.column(column);
    }
    let mut after = String::new();
    loop {
        let tenants = store.tenant_ids(&after, opts.batch_size).await?;
        let Some(last) = tenants.last() else { break };
        after = last.as_str().to_owned();
        for tenant in &tenants {
            let mut counts = Counts::default();
            for column in SealedColumn::ALL {
                let c =
                    reseal_column(store, keyring, opts, tenant, column, &mut summary, out).await?;
                summary.column(column).add(&c);
                counts.add(&c);
            }
            summary.tenants += 1;
            writeln!(out, "  tenant {tenant}: {}", line(&counts, opts.dry_run))?;
        }
    }
    write_summary(&summary, opts.dry_run, out)?;
    Ok(summary)
}

async fn reseal_column(
    store: &Store,
    keyring: &Keyring,
    opts: ResealOptions,
    tenant: &TenantId,
    column: SealedColumn,
    summary: &mut Summary,
    out: &mut (dyn Write + Send),
) -> anyhow::Result<Counts> {
    let mut counts = Counts::default();
    let mut after = String::new();
    loop {
        let page = store
            .sealed_values(tenant, column, &after, opts.batch_size)
            .await?;
        let Some(last) = page.last() else { break };
        after = last.key.clone();
        let mut replacements = Vec::new();
        for row in page {
            let kid = key_id_of(&row.sealed).unwrap_or("legacy");
            *summary.by_key.entry(kid.to_owned()).or_default() += 1;
            let context = context_of(column, &row.key);
            match keyring.reseal(tenant, context.as_deref(), &row.sealed) {
                Ok(Resealed::Current) => counts.current += 1,
                Ok(Resealed::New(new)) => replacements.push(Replacement {
                    key: row.key,
                    old: row.sealed,
                    new,
                }),
                Err(e) => {
                    counts.unopenable += 1;
                    writeln!(
                        out,
                        "  cannot open: tenant {tenant}, {}, row {:?}: {e}",
                        column.label(),
                        row.key
                    )?;
                }
            }
        }
        let attempted = replacements.len() as u64;
        let written = if opts.dry_run || replacements.is_empty() {
            attempted
        } else {
            store.replace_sealed(tenant, column, &replacements).await?
        };
        counts.resealed += written;
        counts.changed += attempted - written;
    }
    Ok(counts)
}

fn line(c: &Counts, dry_run: bool) -> String {
    let mut s = format!(
        "{} {}, {} already current",
        c.resealed,
        if dry_run { "to re-seal" } else { "re-sealed" },
        c.current
    );
    if c.unopenable > 0 {
        s.push_str(&format!(", {} could not be opened", c.unopenable));
    }
    if c.changed > 0 {
        s.push_str(&format!(", {} changed meanwhile", c.changed));
    }
    s
}

fn write_summary(s: &Summary, dry_run: bool, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
    let total = s.total();
    writeln!(
        out,
        "Summary: {} tenant(s), {} sealed value(s)",
        s.tenants,
        total.seen()
    )?;
    for (column, c) in &s.columns {
        writeln!(out, "  {:<17} {}", column.label(), line(c, dry_run))?;
    }
    writeln!(out, "  {:<17} {}", "total", line(&total, dry_run))?;
    if !s.by_key.is_empty() {
        let found: Vec<String> = s.by_key.iter().map(|(k, n)| format!("{k}: {n}")).collect();
        writeln!(out, "  found under      {}", found.join(", "))?;
    }
    if total.changed > 0 {
        writeln!(
            out,
            "{} value(s) changed while this ran and were left as written; run again to check them",
            total.changed
        )?;
    }
    if total.unopenable > 0 {
        writeln!(
            out,
            "{} value(s) could not be opened with the configured keys (listed above): keep the key they were sealed under configured, or remove what they belong to",
            total.unopenable
        )?;
    }
    Ok(())
}
