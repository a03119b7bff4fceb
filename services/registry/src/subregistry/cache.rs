//! The rendered view of a published document (its `server.json` view and
//! its worst-case tools) and the bytes-bounded cache of them by tenant and
//! digest.

use std::sync::Arc;

use pinfold_core::card::{Limits, ServerCard};
use pinfold_core::ids::TenantId;
use pinfold_http::problem::ApiError;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::model::StoredVersion;
use crate::subregistry::server_json::server_view;

/// What the subregistry shows of a published document — its `server.json`
/// view and its worst-case tools — rendered once: both depend on the
/// document alone, so they are cached by digest ([`ViewCache`]).
#[derive(Debug)]
pub struct DocView {
    /// [`server_view`] of the document, serialized.
    pub server: Box<RawValue>,
    /// The worst-case `tools` array, serialized.
    pub tools: Box<RawValue>,
}

impl DocView {
    /// Renders the view of a stored document (CPU work: it parses the
    /// document and reduces every tool; run it on the CPU pool).
    pub fn render(document: &str, limits: &Limits) -> Result<DocView, String> {
        let doc: Value =
            serde_json::from_str(document).map_err(|e| format!("stored document: {e}"))?;
        let card = ServerCard::from_value(&doc, limits)
            .map_err(|e| format!("stored document no longer validates: {e}"))?;
        let mut reduced = pinfold_core::reduce::reduce_signature(&card.signature);
        drop(card);
        let tools = reduced
            .get_mut("tools")
            .map(Value::take)
            .unwrap_or(Value::Array(Vec::new()));
        let Value::Object(obj) = doc else {
            return Err("stored document is not an object".into());
        };
        let server = serde_json::value::to_raw_value(&server_view(obj));
        let tools = serde_json::value::to_raw_value(&tools);
        Ok(DocView {
            server: server.map_err(|e| e.to_string())?,
            tools: tools.map_err(|e| e.to_string())?,
        })
    }

    /// Bytes held.
    fn weight(&self) -> u32 {
        u32::try_from(self.server.get().len() + self.tools.get().len()).unwrap_or(u32::MAX)
    }
}

/// Rendered [`DocView`]s by (tenant, digest), bounded by bytes. Only an
/// optimisation: a miss renders again. Keyed by tenant as well, so that
/// nothing is shared between tenants, not even the timing of a hit.
pub struct ViewCache {
    cache: moka::sync::Cache<(TenantId, String), Arc<DocView>>,
}

impl ViewCache {
    /// A cache holding at most `max_bytes` of rendered views, each for at
    /// most ten minutes after its last use.
    pub fn new(max_bytes: u64) -> ViewCache {
        ViewCache {
            cache: moka::sync::Cache::builder()
                .max_capacity(max_bytes)
                .weigher(|_, v: &Arc<DocView>| v.weight())
                .time_to_idle(std::time::Duration::from_secs(600))
                .build(),
        }
    }

    /// The cached view of the document with `digest` in `tenant`.
    pub fn get(&self, tenant: &TenantId, digest: &str) -> Option<Arc<DocView>> {
        self.cache.get(&(tenant.clone(), digest.to_owned()))
    }

    /// Caches the view of the document with `digest` in `tenant`.
    pub fn insert(&self, tenant: &TenantId, digest: &str, view: Arc<DocView>) {
        self.cache.insert((tenant.clone(), digest.to_owned()), view);
    }

    /// The view of `stored` in `tenant`, rendered here on a miss (CPU work).
    pub fn view(
        &self,
        tenant: &TenantId,
        stored: &StoredVersion,
        limits: &Limits,
    ) -> Result<Arc<DocView>, ApiError> {
        let key = (tenant.clone(), stored.meta.digest.clone());
        if let Some(v) = self.cache.get(&key) {
            return Ok(v);
        }
        let view = DocView::render(&stored.document, limits).map_err(|e| {
            tracing::error!(error = %e, server.name = %stored.server, "subregistry view failed");
            ApiError::internal()
        })?;
        let view = Arc::new(view);
        self.cache.insert(key, view.clone());
        Ok(view)
    }
}

impl Default for ViewCache {
    /// 64 MiB.
    fn default() -> Self {
        ViewCache::new(64 << 20)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Status, VersionMeta};
    use crate::subregistry::fixtures::meta;
    use serde_json::json;

    #[test]
    fn views_render_once_per_tenant_and_digest() {
        let doc = json!({"name": "io.github.a/b", "version": "1.0.0", "title": "Bee",
            "signature": {"tools": [{"name": "t", "inputSchema": {"type": "object"},
                "annotations": [{"readOnlyHint": true}, {"readOnlyHint": false}]}]}});
        let stored = StoredVersion {
            server: "io.github.a/b".into(),
            meta: meta(Status::Approved, true, None),
            document: doc.to_string(),
        };
        let cache = ViewCache::default();
        let (a, b) = (
            TenantId::parse("acme").unwrap(),
            TenantId::parse("bee").unwrap(),
        );
        let limits = Limits::default();
        let first = cache.view(&a, &stored, &limits).unwrap();
        let server: Value = serde_json::from_str(first.server.get()).unwrap();
        assert_eq!(
            server,
            json!({"name": "io.github.a/b", "version": "1.0.0", "title": "Bee", "description": "Bee"})
        );
        let tools: Value = serde_json::from_str(first.tools.get()).unwrap();
        assert_eq!(tools[0]["name"], "t");
        assert_eq!(
            tools[0]["annotations"]["readOnlyHint"], false,
            "the worst case"
        );
        assert!(Arc::ptr_eq(
            &first,
            &cache.view(&a, &stored, &limits).unwrap()
        ));
        assert!(!Arc::ptr_eq(
            &first,
            &cache.view(&b, &stored, &limits).unwrap()
        ));
        let broken = StoredVersion {
            document: "{\"name\": 1}".into(),
            meta: VersionMeta {
                digest: format!("sha256:{}", "d".repeat(64)),
                ..stored.meta.clone()
            },
            ..stored
        };
        assert!(cache.view(&a, &broken, &limits).is_err());
    }
}
