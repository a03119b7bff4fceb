//! What rendering a page reads besides its entries: the documents'
//! rendered views (from the view cache; the misses read in one query and
//! rendered on the CPU pool) and the tenant's enforcement modes.

use std::collections::HashMap;
use std::sync::Arc;

use pinfold_core::ids::TenantId;
use pinfold_http::cpu::offload;
use pinfold_http::problem::ApiError;

use crate::error::store_error;
use crate::policy::EnforcementModes;
use crate::state::RegistryState;
use crate::subregistry::cache::DocView;
use crate::subregistry::listing::Entry;

/// The rendered views of `entries`, in order: from the view cache, the
/// documents of the misses read in one query and rendered on the CPU pool.
pub async fn views(
    st: &RegistryState,
    tenant: &TenantId,
    entries: &[Entry],
) -> Result<Vec<Arc<DocView>>, ApiError> {
    let mut out: Vec<Option<Arc<DocView>>> = entries
        .iter()
        .map(|e| st.views.get(tenant, &e.meta.digest))
        .collect();
    let missing: Vec<(String, String)> = entries
        .iter()
        .zip(&out)
        .filter(|(_, v)| v.is_none())
        .map(|(e, _)| (e.key.clone(), e.meta.version.clone()))
        .collect();
    if missing.is_empty() {
        return Ok(out.into_iter().flatten().collect());
    }
    let docs = st
        .store
        .versions_by_keys(tenant, &missing)
        .await
        .map_err(store_error)?;
    let limits = st.limits.clone();
    let rendered = offload(move || {
        docs.into_iter()
            .map(|(_, stored)| {
                DocView::render(&stored.document, &limits)
                    .map(|v| (stored.meta.digest, Arc::new(v)))
                    .map_err(|e| (stored.server, e))
            })
            .collect::<Result<HashMap<String, Arc<DocView>>, (String, String)>>()
    })
    .await?
    .map_err(|(server, e)| {
        tracing::error!(error = %e, server.name = %server, "subregistry view failed");
        ApiError::internal()
    })?;
    for (digest, view) in &rendered {
        st.views.insert(tenant, digest, view.clone());
    }
    for (slot, e) in out.iter_mut().zip(entries) {
        if slot.is_none() {
            // Versions are never deleted, so every missing one was read.
            *slot = Some(rendered.get(&e.meta.digest).cloned().ok_or_else(|| {
                tracing::error!(server.name = %e.server, version = %e.meta.version,
                    "a listed version has no document");
                ApiError::internal()
            })?);
        }
    }
    Ok(out.into_iter().flatten().collect())
}

/// The enforcement modes of the tenant, or `None` when it does not exist.
pub async fn modes(
    st: &RegistryState,
    tenant: &TenantId,
) -> Result<Option<EnforcementModes>, ApiError> {
    st.policies
        .enforcement_modes(tenant)
        .await
        .map_err(store_error)
}
