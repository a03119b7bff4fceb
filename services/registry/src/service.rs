//! The registry's use cases, without HTTP: reading a server's versions
//! through the ETag index, publishing, status transitions and the tenants'
//! attestation keys. Handlers (and the tenancy hook the server wires) call
//! these; they never talk to the store themselves for a write.

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::StatusCode;
use pinfold_core::audit::NewAuditEvent;
use pinfold_core::card::{CheckedCard, ServerCard};
use pinfold_core::ids::TenantId;
use pinfold_core::names::{ServerName, Version};
use pinfold_http::TenantScope;
use pinfold_http::auth::Role;
use pinfold_http::body::parse_body;
use pinfold_http::cpu::offload;
use pinfold_http::problem::{ApiError, FieldError};
use pinfold_http::tenant::tenant_not_found;
use serde_json::{Value, json};

use crate::error::{
    server_key, server_not_found, store_error, validation_error, version_not_found,
};
use crate::index::ServerIndex;
use crate::model::{
    Action, NewVersion, PublishOutcome, Review, StatusChange, StatusRow, StoredVersion, VersionMeta,
};
use crate::state::{RegistryState, now};

/// The ETag index entry of a server, loaded on a miss.
pub async fn server_index(
    st: &RegistryState,
    tenant: &TenantId,
    key: &str,
) -> Result<Arc<ServerIndex>, ApiError> {
    st.index
        .get_or_load(tenant, key, async {
            st.store.versions(tenant, key).await.map_err(store_error)
        })
        .await
}

/// Resolves `latest` to an exact version.
pub async fn resolve_version(
    st: &RegistryState,
    tenant: &TenantId,
    key: &str,
    version: &str,
) -> Result<String, ApiError> {
    if version != "latest" {
        return Ok(version.to_owned());
    }
    let idx = server_index(st, tenant, key).await?;
    match &idx.latest {
        Some(v) => Ok(v.clone()),
        None if idx.entries.is_empty() => Err(server_not_found()),
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "no_trusted_version",
            "No trusted version",
        )
        .detail("this server has no approved version, so `latest` resolves to nothing")),
    }
}

/// An exact version, or what `latest` points at.
pub async fn load(
    st: &RegistryState,
    tenant: &TenantId,
    key: &str,
    version: &str,
) -> Result<StoredVersion, ApiError> {
    let exact = resolve_version(st, tenant, key, version).await?;
    st.store
        .version(tenant, key, &exact)
        .await
        .map_err(store_error)?
        .ok_or_else(version_not_found)
}

/// An exact version, or what `latest` points at, with its reviews: one
/// store round trip for an exact version.
pub async fn load_record(
    st: &RegistryState,
    tenant: &TenantId,
    key: &str,
    version: &str,
) -> Result<(StoredVersion, Vec<Review>), ApiError> {
    let exact = resolve_version(st, tenant, key, version).await?;
    st.store
        .version_record(tenant, key, &exact)
        .await
        .map_err(store_error)?
        .ok_or_else(version_not_found)
}

// ---------------------------------------------------------------- publish

/// What a publish did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Published {
    /// A new version was stored.
    Created,
    /// The identical document was already stored under this version.
    Existing,
}

/// Publishes a request body: strict parsing, validation, canonical bytes
/// and digest run together in one job on the CPU pool, which also drops
/// the parsed tree, so an async worker neither parses nor frees 64 KiB of
/// JSON. `path` is the (server, version) the request named, which the
/// document must agree with; `event` is the audit event kind.
pub async fn publish_body(
    st: &RegistryState,
    scope: &TenantScope,
    body: Bytes,
    path: Option<(&str, &str)>,
    event: &str,
) -> Result<(Published, StoredVersion, Vec<Review>), ApiError> {
    let limits = st.limits.clone();
    let card = offload(move || {
        let doc = parse_body(&body)?;
        drop(body);
        let checked = ServerCard::check(&doc, &limits).map_err(validation_error);
        drop(doc);
        checked
    })
    .await??;
    publish_checked(st, scope, card, path, event).await
}

/// Publishes an already parsed document after validating it on the CPU
/// pool (the `server.json` import, which rewrites the document first).
pub async fn publish(
    st: &RegistryState,
    scope: &TenantScope,
    doc: Value,
    path: Option<(&str, &str)>,
    event: &str,
) -> Result<(Published, StoredVersion, Vec<Review>), ApiError> {
    let limits = st.limits.clone();
    let card = offload(move || ServerCard::check(&doc, &limits))
        .await?
        .map_err(validation_error)?;
    publish_checked(st, scope, card, path, event).await
}

/// Stores a validated card: the path check, the tenant's policy, the
/// version with its first status row and audit event, the index eviction.
async fn publish_checked(
    st: &RegistryState,
    scope: &TenantScope,
    card: CheckedCard,
    path: Option<(&str, &str)>,
    event: &str,
) -> Result<(Published, StoredVersion, Vec<Review>), ApiError> {
    if let Some((server, version)) = path {
        check_path(&card.name, &card.version, server, version)?;
    }
    let tenant = scope.tenant();
    let key = card.name.canonical().to_owned();
    let policy = st
        .policies
        .registry_policy(tenant, &key)
        .await
        .map_err(store_error)?
        .ok_or_else(tenant_not_found)?;
    let document = std::str::from_utf8(card.canonical()).map_err(|_| ApiError::internal())?;
    let version = card.version.to_string();
    let at = now();
    let meta = VersionMeta {
        version: version.clone(),
        digest: card.digest().to_owned(),
        published_by: scope.actor().to_owned(),
        published_at: at,
        status: StatusRow::initial(policy.approval_required, at),
    };
    let data = json!({
        "digest": card.digest(),
        "tools": card.tools,
        "approval_required": policy.approval_required,
        "status": meta.status.status.as_str(),
    });
    let audit = NewAuditEvent::new(event, scope.actor(), at, data).about(&key, &version);
    let new = NewVersion {
        server_key: &key,
        server_display: card.name.as_str(),
        document,
        title: card.title.as_deref(),
        description: card.description.as_deref(),
        meta,
        audit,
    };
    let outcome = st.store.publish(tenant, &new).await.map_err(store_error)?;
    st.index.evict(tenant, &key);
    let (published, stored) = match outcome {
        PublishOutcome::Created(v) => (Published::Created, v),
        PublishOutcome::Existing(v) => (Published::Existing, v),
        PublishOutcome::Conflict { existing_digest } => {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "version_exists",
                "Version exists with different content",
            )
            .detail(format!(
                "{} {version} is already published with other content; versions are immutable, publish a new version",
                card.name
            ))
            .with("existing_digest", existing_digest)
            .with("submitted_digest", card.digest()));
        }
    };
    let reviews = match published {
        Published::Created => Vec::new(),
        Published::Existing => st
            .store
            .reviews(tenant, &key, &version)
            .await
            .map_err(store_error)?,
    };
    Ok((published, stored, reviews))
}

/// The document must name the server and version of the request's path.
pub(crate) fn check_path(
    name: &ServerName,
    doc_version: &Version,
    server: &str,
    version: &str,
) -> Result<(), ApiError> {
    let mut errors = Vec::new();
    let same_server = ServerName::parse(server).is_ok_and(|s| s == *name);
    if !same_server {
        errors.push(FieldError {
            pointer: "/name".into(),
            code: "path_mismatch".into(),
            message: format!(
                "the document names server {:?} but the path says {server:?}",
                name.as_str()
            ),
        });
    }
    if doc_version.to_string() != version {
        errors.push(FieldError {
            pointer: "/version".into(),
            code: "path_mismatch".into(),
            message: format!(
                "the document has version {:?} but the path says {version:?}",
                doc_version.to_string()
            ),
        });
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::validation(errors))
    }
}

/// Checks a review note or status reason: at most 2,000 characters, and
/// not empty where required.
pub fn check_note(pointer: &str, note: Option<&str>, required: bool) -> Result<(), ApiError> {
    let bad = |message: &str| {
        ApiError::validation(vec![FieldError {
            pointer: pointer.into(),
            code: "invalid_value".into(),
            message: message.into(),
        }])
    };
    match note {
        None if required => Err(bad("required")),
        Some(n) if required && n.trim().is_empty() => Err(bad("must not be empty")),
        Some(n) if n.chars().count() > 2000 => Err(bad("at most 2,000 characters")),
        _ => Ok(()),
    }
}

/// Applies a review decision or lifecycle change to an exact version: the
/// transition table ([`Action::apply`]), separation of duties (a publisher
/// never approves their own version), optimistic concurrency on the status
/// revision, and the ETag index evicted whatever the outcome. Returns the
/// version as it now stands, with its reviews.
pub async fn transition(
    st: &RegistryState,
    scope: &TenantScope,
    server: &str,
    version: &str,
    action: Action,
    note: Option<&str>,
) -> Result<(StoredVersion, Vec<Review>), ApiError> {
    let name = server_key(server)?;
    let key = name.canonical();
    if version == "latest" {
        return Err(ApiError::validation(vec![FieldError {
            pointer: "?version".into(),
            code: "exact_version_required".into(),
            message: "reviews and status changes name an exact version, not `latest`".into(),
        }]));
    }
    let stored = load(st, scope.tenant(), key, version).await?;
    if action == Action::Approve && stored.meta.published_by == scope.actor() {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "separation_of_duties",
            "Cannot approve your own version",
        )
        .detail("the publisher of a version cannot approve it; ask another reviewer"));
    }
    let change = StatusChange::new(key, &stored.meta, action, note, scope.actor(), now());
    let Some(change) = change else {
        let from = stored.meta.status.status;
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "invalid_transition",
            "Status change not allowed",
        )
        .detail(format!(
            "a {} version cannot be {}",
            from.as_str(),
            action.event_kind().trim_start_matches("version.")
        ))
        .with("current_status", from.as_str()));
    };
    let result = st.store.change_status(scope.tenant(), &change).await;
    st.index.evict(scope.tenant(), key);
    result.map_err(store_error)?;
    load_record(st, scope.tenant(), key, &stored.meta.version).await
}

/// A review decision as the API and the console take it: roles
/// `reviewer` or `admin`, a note of at most 2,000 characters, then
/// [`transition`] (separation of duties included).
pub async fn review(
    st: &RegistryState,
    scope: &TenantScope,
    server: &str,
    version: &str,
    decision: crate::model::Decision,
    note: Option<&str>,
) -> Result<(StoredVersion, Vec<Review>), ApiError> {
    scope.require_any(&[Role::Reviewer, Role::Admin])?;
    check_note("/note", note, false)?;
    transition(st, scope, server, version, decision.action(), note).await
}

/// A lifecycle change (deprecate, revoke) as the API and the console take
/// it: roles `admin` or `reviewer`, a reason that is required, not only
/// white space and at most 2,000 characters, then [`transition`].
pub async fn set_status(
    st: &RegistryState,
    scope: &TenantScope,
    server: &str,
    version: &str,
    action: Action,
    reason: &str,
) -> Result<(StoredVersion, Vec<Review>), ApiError> {
    scope.require_any(&[Role::Admin, Role::Reviewer])?;
    check_note("/reason", Some(reason), true)?;
    transition(st, scope, server, version, action, Some(reason)).await
}

// ---------------------------------------------------------------- attestations

/// The tenant's attestation key, created (and sealed) if it does not exist
/// yet. Called when a tenant is created, and again on first use as a
/// fallback.
pub async fn tenant_key(
    st: &RegistryState,
    tenant: &TenantId,
) -> Result<crate::model::StoredKey, ApiError> {
    if let Some(k) = st.store.tenant_key(tenant).await.map_err(store_error)? {
        return Ok(k);
    }
    let fresh = st.keyring.generate_tenant_key(tenant, now()).map_err(|e| {
        tracing::error!(error = %e, "attestation key generation failed");
        ApiError::internal()
    })?;
    st.store
        .insert_tenant_key(tenant, &fresh)
        .await
        .map_err(store_error)
}

/// The signed attestation of a version (a compact JWS by the tenant's key
/// over its current status), for any member of the tenant.
pub async fn attestation(
    st: &RegistryState,
    scope: &TenantScope,
    stored: &StoredVersion,
) -> Result<String, ApiError> {
    scope.require_member()?;
    let key = tenant_key(st, scope.tenant()).await?;
    let claims = crate::keys::AttestationClaims {
        iss: format!("pinfold:tenant:{}", scope.tenant()),
        tenant: scope.tenant().to_string(),
        server: stored.server.clone(),
        version: stored.meta.version.clone(),
        digest: stored.meta.digest.clone(),
        status: stored.meta.status.status.as_str().to_owned(),
        approved_by: stored.meta.status.approved_by.clone(),
        approved_at: stored.meta.status.approved_at.map(|t| t.seconds()),
        iat: now().seconds(),
    };
    crate::keys::sign_attestation(&st.keyring, scope.tenant(), &key, &claims).map_err(|e| {
        tracing::error!(error = %e, "attestation signing failed");
        ApiError::internal()
    })
}
