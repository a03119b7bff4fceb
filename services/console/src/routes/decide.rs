//! The console's state-changing forms on a version: approve or reject with
//! a note, deprecate or revoke with a reason and a confirmation naming the
//! server and version. Each checks the session's CSRF token first, then
//! calls the registry's own use case (`review`, `set_status`), which checks
//! roles and separation of duties exactly as the API does.

use axum::Form;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use pinfold_registry::model::{Action, Decision};
use pinfold_registry::service::{review as review_version, set_status};
use serde::Deserialize;

use super::auth::{Charged, csrf_refusal, signed_in};
use super::respond::{refusal, see_other, service_error};
use crate::render::layout::{Nav, version_href};
use crate::state::ConsoleState;

/// The review form.
#[derive(Debug, Deserialize)]
pub struct ReviewForm {
    /// The session's CSRF token.
    #[serde(default)]
    pub csrf: Option<String>,
    /// `approve` or `reject`.
    #[serde(default)]
    pub decision: Option<String>,
    /// The note.
    #[serde(default)]
    pub note: Option<String>,
}

/// Approves or rejects a version.
pub async fn review(
    State(st): State<ConsoleState>,
    Path((tenant, server, version)): Path<(String, String, String)>,
    charge: Charged,
    headers: HeaderMap,
    Form(form): Form<ReviewForm>,
) -> Response {
    let signed = match signed_in(&st, &headers, charge, &tenant, true).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    if let Some(r) = csrf_refusal(&signed, form.csrf.as_deref()) {
        return r;
    }
    let shell = signed.shell("Review", Nav::Other);
    let decision = match form.decision.as_deref() {
        Some("approve") => Decision::Approve,
        Some("reject") => Decision::Reject,
        _ => {
            return refusal(
                &shell,
                StatusCode::UNPROCESSABLE_ENTITY,
                "Refused",
                "Choose approve or reject.",
            );
        }
    };
    let note = form
        .note
        .as_deref()
        .map(str::trim)
        .filter(|n| !n.is_empty());
    match review_version(
        &st.registry,
        &signed.scope,
        &server,
        &version,
        decision,
        note,
    )
    .await
    {
        Ok((stored, _)) => see_other(
            &format!(
                "{}?done={}",
                version_href(&tenant, &stored.server, &stored.meta.version),
                decision.as_str()
            ),
            &[],
        ),
        Err(e) => service_error(&shell, &e),
    }
}

/// The lifecycle form.
#[derive(Debug, Deserialize)]
pub struct StatusForm {
    /// The session's CSRF token.
    #[serde(default)]
    pub csrf: Option<String>,
    /// `deprecated` or `revoked`.
    #[serde(default)]
    pub status: Option<String>,
    /// Why.
    #[serde(default)]
    pub reason: Option<String>,
    /// The confirmation: the server and version, as the form names them.
    #[serde(default)]
    pub confirm: Option<String>,
}

/// Deprecates or revokes a version, once confirmed.
pub async fn status(
    State(st): State<ConsoleState>,
    Path((tenant, server, version)): Path<(String, String, String)>,
    charge: Charged,
    headers: HeaderMap,
    Form(form): Form<StatusForm>,
) -> Response {
    let signed = match signed_in(&st, &headers, charge, &tenant, true).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    if let Some(r) = csrf_refusal(&signed, form.csrf.as_deref()) {
        return r;
    }
    let shell = signed.shell("Status", Nav::Other);
    let action = match form.status.as_deref() {
        Some("deprecated") => Action::Deprecate,
        Some("revoked") => Action::Revoke,
        _ => {
            return refusal(
                &shell,
                StatusCode::UNPROCESSABLE_ENTITY,
                "Refused",
                "Choose deprecate or revoke.",
            );
        }
    };
    let expected = format!("{server} {version}");
    if form.confirm.as_deref() != Some(expected.as_str()) {
        return refusal(
            &shell,
            StatusCode::UNPROCESSABLE_ENTITY,
            "Not confirmed",
            &format!("Confirm the change to {server} version {version}; nothing was changed."),
        );
    }
    let reason = form.reason.unwrap_or_default();
    match set_status(
        &st.registry,
        &signed.scope,
        &server,
        &version,
        action,
        &reason,
    )
    .await
    {
        Ok((stored, _)) => see_other(
            &format!(
                "{}?done=status",
                version_href(&tenant, &stored.server, &stored.meta.version)
            ),
            &[],
        ),
        Err(e) => service_error(&shell, &e),
    }
}
