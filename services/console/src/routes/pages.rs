//! The console's read pages: the review queue, a version, the audit log
//! and the ledger. Each reads through the registry's use cases or the
//! services' stores under the API's own role checks, and renders on the
//! CPU pool where a page compares signatures.

use std::collections::BTreeMap;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use pinfold_core::card::ServerCard;
use pinfold_core::ids::Timestamp;
use pinfold_core::scope::Hierarchy;
use pinfold_http::auth::Role;
use pinfold_http::cpu::offload;
use pinfold_http::problem::ApiError;
use pinfold_registry::error::{server_key, store_error};
use pinfold_registry::model::{Action, Status, StoredVersion};
use pinfold_registry::service::{attestation, load, load_record, server_index};
use pinfold_registry::store::ServerQuery;
use pinfold_scope::model::GrantView;
use pinfold_tenancy::AuditFilter;
use serde::Deserialize;

use super::auth::{Charged, Signed, signed_in};
use super::respond::{html, see_other, service_error};
use crate::analysis::{compare, first_headline};
use crate::render::audit::{AuditFilters, AuditRow, audit_page};
use crate::render::layout::{Nav, Shell, segment, tenant_href};
use crate::render::ledger::{GrantRow, SessionRow, ledger_page};
use crate::render::queue::{QueueRow, queue_page};
use crate::render::version::{
    Base, Decide, Permit, ReviewLine, VersionInfo, VersionPage, version_page,
};
use crate::state::ConsoleState;

/// Rows per page of the queue, the audit log and the ledger.
const PAGE: usize = 25;
/// The most servers with pending versions the queue looks at.
const QUEUE_SERVERS: usize = 2000;

/// `/console/t/{tenant}`: the queue.
pub async fn tenant_root(Path(tenant): Path<String>) -> Response {
    see_other(&format!("{}/queue", tenant_href(&tenant)), &[])
}

/// `?after=` of a paged list.
#[derive(Debug, Deserialize, Default)]
pub struct PageQuery {
    /// Where the previous page ended.
    #[serde(default)]
    pub after: Option<String>,
}

fn parse_card(doc: &str, limits: &pinfold_core::card::Limits) -> Result<ServerCard, ApiError> {
    let value: serde_json::Value = serde_json::from_str(doc).map_err(|_| ApiError::internal())?;
    ServerCard::from_value(&value, limits).map_err(|_| {
        tracing::error!("a stored document no longer validates");
        ApiError::internal()
    })
}

/// The review queue: pending versions, oldest first.
pub async fn queue(
    State(st): State<ConsoleState>,
    Path(tenant): Path<String>,
    Query(q): Query<PageQuery>,
    charge: Charged,
    headers: HeaderMap,
) -> Response {
    let signed = match signed_in(&st, &headers, charge, &tenant, false).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    match queue_rows(&st, &signed, q.after.as_deref()).await {
        Ok((rows, next)) => {
            let next =
                next.map(|n| format!("{}/queue?after={}", tenant_href(&tenant), segment(&n)));
            html(
                StatusCode::OK,
                queue_page(&signed.shell("Review queue", Nav::Queue), &rows, next),
            )
        }
        Err(e) => service_error(&signed.shell("Review queue", Nav::Queue), &e),
    }
}

async fn queue_rows(
    st: &ConsoleState,
    signed: &Signed,
    after: Option<&str>,
) -> Result<(Vec<QueueRow>, Option<String>), ApiError> {
    signed.scope.require_member()?;
    let reg = &st.registry;
    let tenant = signed.scope.tenant();
    // Every pending version (servers with one, in pages), sorted oldest first.
    let mut pending: Vec<(Timestamp, String, String, String)> = Vec::new();
    let mut cursor: Option<String> = None;
    let mut servers = 0;
    loop {
        let page = reg
            .store
            .servers(
                tenant,
                &ServerQuery {
                    q: None,
                    status: Some(Status::Pending),
                    after: cursor.clone(),
                    limit: 100,
                },
            )
            .await
            .map_err(store_error)?;
        let done = page.len() < 100;
        for (key, row) in &page {
            servers += 1;
            for meta in reg.store.versions(tenant, key).await.map_err(store_error)? {
                if meta.status.status == Status::Pending {
                    pending.push((
                        meta.published_at,
                        key.clone(),
                        row.name.clone(),
                        meta.version,
                    ));
                }
            }
        }
        cursor = page.last().map(|(k, _)| k.clone());
        if done || servers >= QUEUE_SERVERS {
            break;
        }
    }
    pending.sort();
    let position =
        |p: &(Timestamp, String, String, String)| format!("{}:{}:{}", p.0.millis(), p.1, p.3);
    let start = match after {
        Some(a) => pending
            .iter()
            .position(|p| position(p) == a)
            .map_or(0, |i| i + 1),
        None => 0,
    };
    let slice: Vec<_> = pending.iter().skip(start).take(PAGE).cloned().collect();
    let next =
        (pending.len() > start + slice.len()).then(|| position(slice.last().expect("a full page")));
    let mut rows = Vec::with_capacity(slice.len());
    for (_, key, display, version) in slice {
        let stored = load(reg, tenant, &key, &version).await?;
        let latest = server_index(reg, tenant, &key).await?.latest.clone();
        let base = match latest {
            Some(v) => Some(load(reg, tenant, &key, &v).await?),
            None => None,
        };
        let limits = reg.limits.clone();
        let (doc, base_doc) = (
            stored.document.clone(),
            base.as_ref().map(|b| b.document.clone()),
        );
        let headline = offload(move || -> Result<_, ApiError> {
            let card = parse_card(&doc, &limits)?;
            Ok(match base_doc {
                Some(b) => compare(&parse_card(&b, &limits)?, &card).headline,
                None => first_headline(&card),
            })
        })
        .await??;
        rows.push(QueueRow {
            server: display,
            version,
            published_by: stored.meta.published_by.clone(),
            published_at: stored.meta.published_at.to_string(),
            base: base.map(|b| b.meta.version),
            headline,
        });
    }
    Ok((rows, next))
}

/// `?done=` of a version page (after a decision).
#[derive(Debug, Deserialize, Default)]
pub struct VersionQuery {
    /// What was done.
    #[serde(default)]
    pub done: Option<String>,
}

fn permits(signed: &Signed, stored: &StoredVersion) -> (Permit, Permit, Permit) {
    let status = stored.meta.status.status;
    let reviewer = signed
        .scope
        .require_any(&[Role::Reviewer, Role::Admin])
        .is_ok();
    let no_role = || {
        Permit::Denied(format!(
            "your roles ({}) include neither reviewer nor admin",
            signed.roles
        ))
    };
    let approve = if Action::Approve.apply(status).is_none() {
        Permit::Hidden
    } else if !reviewer {
        no_role()
    } else if stored.meta.published_by == signed.scope.actor() {
        Permit::Denied(
            "you published this version, and the publisher of a version cannot approve it \
             (separation of duties): another reviewer must"
                .into(),
        )
    } else {
        Permit::Allowed
    };
    let reject = if Action::Reject.apply(status).is_none() {
        Permit::Hidden
    } else if !reviewer {
        no_role()
    } else {
        Permit::Allowed
    };
    let lifecycle =
        if Action::Deprecate.apply(status).is_none() && Action::Revoke.apply(status).is_none() {
            Permit::Hidden
        } else if !reviewer {
            no_role()
        } else {
            Permit::Allowed
        };
    (approve, reject, lifecycle)
}

/// A version's page.
pub async fn version(
    State(st): State<ConsoleState>,
    Path((tenant, server, version)): Path<(String, String, String)>,
    Query(q): Query<VersionQuery>,
    charge: Charged,
    headers: HeaderMap,
) -> Response {
    let signed = match signed_in(&st, &headers, charge, &tenant, false).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    match version_html(&st, &signed, &server, &version, q.done.as_deref()).await {
        Ok(page) => html(StatusCode::OK, page),
        Err(e) => service_error(&signed.shell("Version", Nav::Other), &e),
    }
}

async fn version_html(
    st: &ConsoleState,
    signed: &Signed,
    server: &str,
    version: &str,
    done: Option<&str>,
) -> Result<String, ApiError> {
    signed.scope.require_member()?;
    let reg = &st.registry;
    let tenant = signed.scope.tenant();
    let name = server_key(server)?;
    let key = name.canonical();
    let (stored, reviews) = load_record(reg, tenant, key, version).await?;
    let latest = server_index(reg, tenant, key).await?.latest.clone();
    let base = match latest {
        Some(v) if v != stored.meta.version => Some(load(reg, tenant, key, &v).await?),
        _ => None,
    };
    let attested = matches!(
        stored.meta.status.status,
        Status::Approved | Status::Deprecated
    );
    let jws = if attested {
        Some(attestation(reg, &signed.scope, &stored).await?)
    } else {
        None
    };
    let (approve, reject, lifecycle) = permits(signed, &stored);
    let flash = match done {
        Some("approve") => Some("Approved. The attestation below is signed by the tenant's key."),
        Some("reject") => Some("Rejected."),
        Some("status") => Some("Status changed."),
        _ => None,
    };
    let limits = reg.limits.clone();
    let tenant = tenant.as_str().to_owned();
    let (subject, roles, csrf) = (
        signed.session.subject.clone(),
        signed.roles.clone(),
        signed.csrf.clone(),
    );
    offload(move || -> Result<String, ApiError> {
        let card = parse_card(&stored.document, &limits)?;
        let base_card = match &base {
            Some(b) => Some(parse_card(&b.document, &limits)?),
            None => None,
        };
        let comparison = base_card.as_ref().map(|b| compare(b, &card));
        let published_at = stored.meta.published_at.to_string();
        let page = VersionPage {
            shell: Shell {
                title: "",
                tenant: &tenant,
                user: Some((&subject, &roles)),
                csrf: Some(&csrf),
                nav: Nav::Other,
            },
            info: VersionInfo {
                server: &stored.server,
                version: &stored.meta.version,
                status: stored.meta.status.status.as_str(),
                digest: &stored.meta.digest,
                published_by: &stored.meta.published_by,
                published_at,
                approved_by: stored.meta.status.approved_by.as_deref(),
                reason: stored.meta.status.reason.as_deref(),
            },
            card: &card,
            base: match (&base, &comparison) {
                (Some(b), Some(c)) => Some(Base {
                    version: &b.meta.version,
                    comparison: c,
                }),
                _ => None,
            },
            reviews: reviews
                .iter()
                .map(|r| ReviewLine {
                    decision: r.decision.as_str(),
                    reviewer: &r.reviewer,
                    at: r.at.to_string(),
                    note: r.note.as_deref(),
                })
                .collect(),
            attestation: jws.as_deref(),
            decide: Some(Decide {
                csrf: &csrf,
                approve,
                reject,
                lifecycle,
            }),
            flash,
        };
        Ok(version_page(&page))
    })
    .await?
}

/// The audit page's query.
#[derive(Debug, Deserialize, Default)]
pub struct AuditQuery {
    /// Event kind.
    #[serde(default)]
    pub kind: Option<String>,
    /// Actor.
    #[serde(default)]
    pub actor: Option<String>,
    /// Server.
    #[serde(default)]
    pub server: Option<String>,
    /// From (RFC 3339 or a date).
    #[serde(default)]
    pub since: Option<String>,
    /// Until (RFC 3339 or a date).
    #[serde(default)]
    pub until: Option<String>,
    /// The last event id of the previous page.
    #[serde(default)]
    pub after: Option<String>,
}

fn nonempty(s: &Option<String>) -> Option<String> {
    s.as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// A time filter: RFC 3339, or a date (midnight UTC).
fn parse_time(s: &str) -> Option<Timestamp> {
    use time::format_description::well_known::Rfc3339;
    let at = time::OffsetDateTime::parse(s, &Rfc3339).ok().or_else(|| {
        let fmt = time::macros::format_description!("[year]-[month]-[day]");
        time::Date::parse(s, &fmt)
            .ok()
            .map(|d| d.midnight().assume_utc())
    })?;
    i64::try_from(at.unix_timestamp_nanos() / 1_000_000)
        .ok()
        .map(Timestamp::from_millis)
}

/// The audit log with its filters.
pub async fn audit(
    State(st): State<ConsoleState>,
    Path(tenant): Path<String>,
    Query(q): Query<AuditQuery>,
    charge: Charged,
    headers: HeaderMap,
) -> Response {
    let signed = match signed_in(&st, &headers, charge, &tenant, false).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let shell = signed.shell("Audit log", Nav::Audit);
    if let Err(e) = signed.scope.require_any(&[Role::Admin, Role::Reviewer]) {
        return service_error(&shell, &e);
    }
    let shown = AuditFilters {
        kind: q.kind.clone().unwrap_or_default(),
        actor: q.actor.clone().unwrap_or_default(),
        server: q.server.clone().unwrap_or_default(),
        since: q.since.clone().unwrap_or_default(),
        until: q.until.clone().unwrap_or_default(),
    };
    let mut error = None;
    let mut time = |s: &Option<String>, what: &str| match nonempty(s) {
        None => None,
        Some(t) => {
            let parsed = parse_time(&t);
            if parsed.is_none() {
                error = Some(format!(
                    "{what}: expected a date (2026-01-31) or an RFC 3339 time"
                ));
            }
            parsed
        }
    };
    let since = time(&q.since, "Since");
    let until = time(&q.until, "Until");
    let server = match nonempty(&q.server) {
        Some(s) => match server_key(&s) {
            Ok(name) => Some(name.canonical().to_owned()),
            Err(_) => Some(s),
        },
        None => None,
    };
    let filter = AuditFilter {
        server,
        kind: nonempty(&q.kind),
        actor: nonempty(&q.actor),
        since,
        until,
    };
    let after = q.after.as_deref().and_then(|a| a.parse::<i64>().ok());
    let mut events = match st
        .tenants
        .audit(signed.scope.tenant(), &filter, after, PAGE as u32 + 1)
        .await
    {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!(error = %e, "console: reading the audit log failed");
            return service_error(&shell, &ApiError::database_unavailable());
        }
    };
    let more = events.len() > PAGE;
    events.truncate(PAGE);
    let rows: Vec<AuditRow> = events
        .iter()
        .map(|e| AuditRow {
            id: e.id,
            at: e.at.to_string(),
            actor: e.actor.clone(),
            kind: e.kind.clone(),
            server: e.server.clone(),
            version: e.version.clone(),
            data: e.data.to_string(),
        })
        .collect();
    let next = more.then(|| {
        let mut qs = url::form_urlencoded::Serializer::new(String::new());
        for (k, v) in [
            ("kind", &shown.kind),
            ("actor", &shown.actor),
            ("server", &shown.server),
            ("since", &shown.since),
            ("until", &shown.until),
        ] {
            if !v.is_empty() {
                qs.append_pair(k, v);
            }
        }
        qs.append_pair("after", &rows.last().map(|r| r.id).unwrap_or(0).to_string());
        format!("{}/audit?{}", tenant_href(&tenant), qs.finish())
    });
    html(
        StatusCode::OK,
        audit_page(&shell, &shown, &rows, error.as_deref(), next),
    )
}

/// The ledger: grants (over-privileged flagged) and resolve sessions.
pub async fn ledger(
    State(st): State<ConsoleState>,
    Path(tenant): Path<String>,
    Query(q): Query<PageQuery>,
    charge: Charged,
    headers: HeaderMap,
) -> Response {
    let signed = match signed_in(&st, &headers, charge, &tenant, false).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let shell = signed.shell("Ledger", Nav::Ledger);
    match ledger_rows(&st, &signed, q.after.as_deref()).await {
        Ok((sessions, grants, next)) => {
            let next =
                next.map(|n| format!("{}/ledger?after={}", tenant_href(&tenant), segment(&n)));
            html(
                StatusCode::OK,
                ledger_page(&shell, &sessions, &grants, next),
            )
        }
        Err(e) => service_error(&shell, &e),
    }
}

async fn ledger_rows(
    st: &ConsoleState,
    signed: &Signed,
    after: Option<&str>,
) -> Result<(Vec<SessionRow>, Vec<GrantRow>, Option<String>), ApiError> {
    signed.scope.require_any(&[Role::Admin, Role::Reviewer])?;
    let tenant = signed.scope.tenant();
    let unavailable = |e: &dyn std::fmt::Display| {
        tracing::warn!(error = %e, "console: reading the ledger failed");
        ApiError::database_unavailable()
    };
    let mut rows = st
        .grants
        .grants(tenant, after, PAGE as u32 + 1)
        .await
        .map_err(|e| unavailable(&e))?;
    let more = rows.len() > PAGE;
    rows.truncate(PAGE);
    let mut hierarchies: BTreeMap<String, Hierarchy> = BTreeMap::new();
    let mut grants = Vec::with_capacity(rows.len());
    for r in &rows {
        if !hierarchies.contains_key(&r.provider) {
            let h = st
                .grants
                .provider(tenant, &r.provider)
                .await
                .map_err(|e| unavailable(&e))?
                .and_then(|p| p.profile.hierarchy().ok())
                .unwrap_or_else(Hierarchy::flat);
            hierarchies.insert(r.provider.clone(), h);
        }
        let v = GrantView::new(r, &hierarchies[&r.provider]);
        grants.push(GrantRow {
            id: v.id,
            provider: v.provider,
            principal: v.principal,
            status: v.status.as_str().to_owned(),
            requested: v.requested,
            granted: v.granted.unwrap_or_default(),
            needed: v.needed,
            excess: v.unneeded,
            created_at: v.created_at.to_string(),
        });
    }
    let next = more.then(|| rows.last().map(|r| r.id.clone()).unwrap_or_default());
    // The first page shows the open resolve sessions too.
    let sessions = if after.is_none() {
        st.resolve_sessions
            .sessions(tenant, None, PAGE as u32)
            .await
            .map_err(|e| unavailable(&e))?
            .into_iter()
            .map(|s| SessionRow {
                id: s.id,
                principal: s.principal,
                server: s.server,
                version: s.version,
                mode: s.mode.as_str().to_owned(),
                until: s.expires_at.to_string(),
            })
            .collect()
    } else {
        Vec::new()
    };
    Ok((sessions, grants, next))
}
