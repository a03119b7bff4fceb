//! Comparing versions with each other (diff) and with observations (verify).

use axum::Json;
use axum::extract::{Path, Query, Request, State};
use pinfold_core::Mode;
use pinfold_core::card::ServerCard;
use pinfold_http::TenantScope;
use pinfold_http::body::read_value;
use pinfold_http::cpu::offload;
use pinfold_http::problem::{ApiError, FieldError, ProblemBody};
use pinfold_http::tenant::tenant_not_found;
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};

use crate::error::{server_key, store_error, validation_error};
use crate::model::StoredVersion;
use crate::routes::paths::{ServerPath, VersionPath};
use crate::service::load;
use crate::state::RegistryState;

// ---------------------------------------------------------------- diff, verify

/// `?from=&to=`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct DiffQuery {
    /// The older version (or `latest`).
    pub from: String,
    /// The newer version (or `latest`).
    pub to: String,
}

/// The capability diff between two versions (any role in the tenant).
///
/// Every change is classified `escalation` (something less safe became
/// possible), `incompatible` (not less safe, but a server showing it fails
/// verification against the older version, e.g. a changed schema),
/// `reduction` or `neutral`; `classification` is the most serious.
#[utoipa::path(
    get,
    path = "/v1/tenants/{tenant}/servers/{server}/diff",
    tag = "registry",
    operation_id = "diff_versions",
    params(ServerPath, DiffQuery),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "`{from, to, classification, changes}`", content_type = "application/json", body = Object),
        (status = 400, description = "Missing from/to", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such version", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn diff_versions(
    State(st): State<RegistryState>,
    scope: TenantScope,
    Path(p): Path<ServerPath>,
    Query(q): Query<DiffQuery>,
) -> Result<Json<Value>, ApiError> {
    scope.require_member()?;
    let name = server_key(&p.server)?;
    let key = name.canonical();
    let a = load(&st, scope.tenant(), key, &q.from).await?;
    let b = load(&st, scope.tenant(), key, &q.to).await?;
    let parse = |s: &StoredVersion| {
        serde_json::from_str::<Value>(&s.document).map_err(|_| ApiError::internal())
    };
    let diff = pinfold_core::ops::diff(&parse(&a)?, &parse(&b)?).map_err(|e| {
        tracing::error!(error = %e, "stored document no longer validates");
        ApiError::internal()
    })?;
    let mut out = serde_json::to_value(&diff).map_err(|_| ApiError::internal())?;
    out["from"] = json!({"version": a.meta.version, "digest": a.meta.digest});
    out["to"] = json!({"version": b.meta.version, "digest": b.meta.digest});
    Ok(Json(out))
}

/// `?mode=`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct ModeQuery {
    /// `strict`, `permissive` or `advisory`; default: the server's policy.
    #[param(pattern = "^(strict|permissive|advisory)$")]
    pub mode: Option<String>,
}

fn parse_mode(s: &str, pointer: &str) -> Result<Mode, ApiError> {
    s.parse().map_err(|_| {
        ApiError::validation(vec![FieldError {
            pointer: pointer.into(),
            code: "invalid_value".into(),
            message: "mode is strict, permissive or advisory".into(),
        }])
    })
}

/// What a client observed (document form of the verify body; any member
/// may be absent or null, and a whole `tools/list` result is accepted as it
/// is).
#[derive(ToSchema)]
#[schema(as = VerifyBody)]
pub struct VerifyBodyDoc {
    /// Tools as the client listed them.
    #[schema(value_type = Option<Vec<Object>>)]
    pub tools: Option<Vec<Value>>,
    /// Prompts as the client listed them.
    #[schema(value_type = Option<Vec<Object>>)]
    pub prompts: Option<Vec<Value>>,
    /// Resources as the client listed them.
    #[schema(value_type = Option<Vec<Object>>)]
    pub resources: Option<Vec<Value>>,
    /// Resource templates as the client listed them.
    #[schema(rename = "resourceTemplates", value_type = Option<Vec<Object>>)]
    pub resource_templates: Option<Vec<Value>>,
    /// Enforcement mode for this check (the `mode` query parameter wins).
    #[schema(value_type = Option<pinfold_http::report::EnforcementModeSchema>, nullable = false)]
    pub mode: Option<String>,
}

/// Check what a client observed against a version (any role in the tenant).
///
/// Body: any of `tools`, `prompts`, `resources`, `resourceTemplates` as a
/// client received them (or a whole `tools/list` result), optional `mode`.
/// The mode defaults to the server's override, else the tenant's.
#[utoipa::path(
    post,
    path = "/v1/tenants/{tenant}/servers/{server}/versions/{version}/verify",
    tag = "registry",
    operation_id = "verify_version",
    params(VersionPath, ModeQuery),
    request_body(content = VerifyBodyDoc, example = json!({"tools": [{"name": "read_file", "inputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": true}}], "mode": "strict"})),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The containment report", content_type = "application/json", body = pinfold_http::report::VerifyReportDoc),
        (status = 404, description = "No such version", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "Malformed observation", body = ProblemBody, content_type = "application/problem+json"),
    )
)]
pub async fn verify_version(
    State(st): State<RegistryState>,
    scope: TenantScope,
    Path(p): Path<VersionPath>,
    Query(q): Query<ModeQuery>,
    req: Request,
) -> Result<Json<Value>, ApiError> {
    scope.require_member()?;
    let mut observed = read_value(req, &()).await?;
    let body_mode = match observed.as_object_mut().and_then(|m| m.remove("mode")) {
        None => None,
        Some(Value::String(s)) => Some(parse_mode(&s, "/mode")?),
        Some(_) => return Err(parse_mode("", "/mode").unwrap_err()),
    };
    let name = server_key(&p.server)?;
    let key = name.canonical();
    let mode = match (q.mode.as_deref(), body_mode) {
        (Some(m), _) => parse_mode(m, "?mode")?,
        (None, Some(m)) => m,
        (None, None) => {
            st.policies
                .registry_policy(scope.tenant(), key)
                .await
                .map_err(store_error)?
                .ok_or_else(tenant_not_found)?
                .mode
        }
    };
    let stored = load(&st, scope.tenant(), key, &p.version).await?;
    let limits = st.limits.clone();
    let document = stored.document.clone();
    let report = offload(move || {
        let doc: Value = serde_json::from_str(&document).map_err(|_| ApiError::internal())?;
        let card = ServerCard::from_value(&doc, &limits).map_err(|e| {
            tracing::error!(error = %e, "stored document no longer validates");
            ApiError::internal()
        })?;
        pinfold_core::ops::verify_card(&card, &observed, mode).map_err(validation_error)
    })
    .await??;
    let mut out = serde_json::to_value(&report).map_err(|_| ApiError::internal())?;
    out["version"] = json!(stored.meta.version);
    out["digest"] = json!(stored.meta.digest);
    Ok(Json(out))
}
