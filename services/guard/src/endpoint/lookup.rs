//! The route as this replica serves it: read from the store, pinned to an
//! approved version, its upstream opened, its review task started, and
//! each drift the review finds recorded once.

#![allow(clippy::result_large_err)]

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use pinfold_core::audit::NewAuditEvent;
use pinfold_core::card::ServerCard;
use pinfold_core::guard::ToolsReview;
use pinfold_core::ids::{TenantId, Timestamp};
use pinfold_http::problem::ApiError;
use pinfold_resolve_check::PreparedSignature;
use serde_json::{Value, json};

use super::live::{Fingerprint, LiveRoute, TaskConfig};
use super::upstream::{Outbound, Target};
use crate::model::{GuardRoute, headers_context};

use super::context::{EndpointState, now_ms, with_route_key};

pub(super) fn route_not_found() -> Response {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "guard_route_not_found",
        "Guard route not found",
    )
    .detail("no guard route is configured for this server")
    .into_response()
}

/// The route as this replica serves it, built or refreshed from the store.
pub(super) async fn live(
    st: &EndpointState,
    tenant: &TenantId,
    server: &str,
) -> Result<Arc<LiveRoute>, Response> {
    let cached = with_route_key(tenant, server, |key| st.0.routes.get(key));
    if let Some(l) = &cached
        && l.checked
            .lock()
            .map(|c| c.elapsed() < st.0.config.route_check)
            .unwrap_or(false)
    {
        return Ok(l.clone());
    }
    let route =
        st.0.store
            .route(tenant, server)
            .await
            .map_err(|e| store_error(&e))?
            .ok_or_else(route_not_found)?;
    let approved = st
        .0
        .approved
        .approved(tenant, &route.server, &route.version)
        .await
        .map_err(IntoResponse::into_response)?
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::CONFLICT,
                "no_approved_version",
                "No approved version",
            )
            .detail(format!(
                "the route pins {}, and no approved version of the server matches it: the guard serves nothing until one is approved",
                route.version.as_str()
            ))
            .into_response()
        })?;
    let mode = match route.mode {
        Some(m) => m,
        None => {
            st.0.approved
                .mode(tenant, &route.server)
                .await
                .map_err(IntoResponse::into_response)?
        }
    };
    let fingerprint = Fingerprint {
        revision: route.revision,
        digest: approved.digest.clone(),
        mode,
        calls: route.calls,
    };
    if let Some(l) = cached
        && l.fingerprint == fingerprint
    {
        if let Ok(mut c) = l.checked.lock() {
            *c = Instant::now();
        }
        return Ok(l);
    }
    let limits = &st.0.config.limits;
    let card = ServerCard::from_value(&approved.card, limits).map_err(|_| {
        tracing::error!(server = %route.server, "the approved card does not read");
        ApiError::internal().into_response()
    })?;
    let target = target(st, tenant, &route, &card).await?;
    let prepared = PreparedSignature::new(&approved.card, limits)
        .ok()
        .map(Arc::new);
    let on_drift = drift_hook(st, tenant, &route, &approved.version, &approved.digest);
    let l = LiveRoute::start(
        tenant.clone(),
        fingerprint,
        target,
        approved,
        card.signature,
        prepared,
        TaskConfig {
            outbound: outbound(st),
            limits: limits.clone(),
            probe_budget: st.0.config.probe_budget,
            review_interval: st.0.config.review_interval,
        },
        on_drift,
    );
    with_route_key(tenant, server, |key| {
        st.0.routes.insert(key.into(), l.clone())
    });
    Ok(l)
}

pub(super) fn outbound(st: &EndpointState) -> Outbound {
    Outbound {
        egress: st.0.egress.egress.clone(),
        max_bytes: st.0.config.max_response_bytes,
        timeout: st.0.config.upstream_timeout,
    }
}

pub(super) fn store_error(e: &crate::store::StoreError) -> Response {
    match e {
        crate::store::StoreError::Unavailable(m) => {
            tracing::error!(error = %m, "database unavailable");
            ApiError::database_unavailable().into_response()
        }
        other => {
            tracing::error!(error = %other, "database error");
            ApiError::internal().into_response()
        }
    }
}

/// The upstream of a route: its URL (else the card's one `streamable-http`
/// remote), its headers opened, the tenant's egress rules.
pub(super) async fn target(
    st: &EndpointState,
    tenant: &TenantId,
    route: &GuardRoute,
    card: &ServerCard,
) -> Result<Target, Response> {
    let url = match &route.upstream_url {
        Some(u) => u.clone(),
        None => {
            let remotes: Vec<&str> = card
                .remotes
                .iter()
                .filter(|r| r.get("type").and_then(Value::as_str) == Some("streamable-http"))
                .filter_map(|r| r.get("url").and_then(Value::as_str))
                .collect();
            match remotes.as_slice() {
                [one] => (*one).to_owned(),
                _ => {
                    return Err(ApiError::new(
                        StatusCode::CONFLICT,
                        "guard_upstream_unknown",
                        "Upstream unknown",
                    )
                    .detail("the route names no upstream URL and the approved card does not list exactly one streamable-http remote")
                    .into_response());
                }
            }
        }
    };
    let url = reqwest::Url::parse(&url).map_err(|_| ApiError::internal().into_response())?;
    let mut headers = HeaderMap::new();
    if let Some(sealed) = &route.headers_sealed {
        let plain =
            st.0.sealer
                .open(tenant, &headers_context(&route.server), sealed)
                .map_err(|e| {
                    tracing::error!(error = %e, "sealed guard route headers do not open");
                    ApiError::internal().into_response()
                })?;
        let pairs: Vec<(String, String)> = serde_json::from_slice(&plain).map_err(|_| {
            tracing::error!("sealed guard route headers are not JSON");
            ApiError::internal().into_response()
        })?;
        for (k, v) in pairs {
            if let (Ok(k), Ok(v)) = (
                axum::http::HeaderName::from_bytes(k.as_bytes()),
                HeaderValue::from_str(&v),
            ) {
                headers.insert(k, v);
            }
        }
    }
    let rules =
        st.0.egress
            .rules(tenant)
            .await
            .map_err(IntoResponse::into_response)?;
    Ok(Target {
        url,
        headers,
        rules,
    })
}

/// Records each distinct drift once (across replicas) as an audit event.
pub(super) fn drift_hook(
    st: &EndpointState,
    tenant: &TenantId,
    route: &GuardRoute,
    version: &str,
    digest: &str,
) -> super::live::DriftHook {
    let store = st.0.store.clone();
    let stats = st.0.stats.clone();
    let tenant = tenant.clone();
    let server = route.server.clone();
    let version = version.to_owned();
    let digest = digest.to_owned();
    Arc::new(move |review: Arc<ToolsReview>| {
        let drifts: Vec<Value> = review
            .drifts()
            .iter()
            .map(|d| {
                json!({
                    "tool": d.tool,
                    "standing": d.standing,
                    "class": d.class.as_str(),
                    "changes": d.changes.iter().map(|c| c.kind).collect::<Vec<_>>(),
                    "withheld": d.withheld,
                })
            })
            .collect();
        let event = NewAuditEvent::new(
            "guard.drift",
            "pinfold-guard",
            Timestamp::from_millis(now_ms()),
            json!({
                "route": server,
                "mode": review.mode().as_str(),
                "pinned_digest": digest,
                "upstream_digest": review.upstream_digest(),
                "drifts": drifts,
            }),
        )
        .about(&server, &version);
        for d in review.drifts() {
            tracing::warn!(server = %server, tool = %d.tool, class = d.class.as_str(),
                withheld = d.withheld, "guard: the upstream drifted from the signature");
        }
        let (store, stats, tenant, server, digest) = (
            store.clone(),
            stats.clone(),
            tenant.clone(),
            server.clone(),
            digest.clone(),
        );
        let upstream = review.upstream_digest().to_owned();
        tokio::spawn(async move {
            match store
                .record_drift(&tenant, &server, &digest, &upstream, &event)
                .await
            {
                Ok(true) => {
                    stats.drifts.fetch_add(1, Ordering::Relaxed);
                }
                Ok(false) => {}
                Err(e) => tracing::error!(error = %e, "recording a guard drift failed"),
            }
        });
    })
}
