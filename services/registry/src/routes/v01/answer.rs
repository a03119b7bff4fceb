//! What a `/v0.1` answer carries: a body with its strong `ETag`, or a `304`
//! when the caller holds it, never stored by a shared cache; and a page
//! rendered as the official `ServerList`.

use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use pinfold_core::ids::TenantId;
use pinfold_http::cpu::offload;
use pinfold_http::problem::ApiError;

use crate::index::if_none_match;
use crate::policy::EnforcementModes;
use crate::routes::conditional::{etag_value, not_modified};
use crate::routes::v01::params::cursor_for;
use crate::state::RegistryState;
use crate::subregistry::listing::Entry;
use crate::subregistry::response::{self, ListMetadata, ServerList, ServerResponse};
use crate::subregistry::{etag, views};

/// Answers to be revalidated every time, and per caller: `private,
/// no-cache` with `Vary: Authorization`.
pub(super) fn no_cache(h: &mut HeaderMap) {
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, no-cache"),
    );
    h.insert(header::VARY, HeaderValue::from_static("Authorization"));
}

/// `304` when the caller holds `tag`.
pub(super) fn not_modified_if(inm: Option<&HeaderValue>, tag: &str) -> Option<Response> {
    let held = inm.and_then(|v| v.to_str().ok())?;
    if_none_match(held, tag).then(|| {
        let mut r = not_modified(tag, &[]);
        no_cache(r.headers_mut());
        r
    })
}

/// `200` with a JSON `body` and its `ETag`.
pub(super) fn respond(body: Vec<u8>, tag: &str) -> Response {
    let mut r = body.into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(header::ETAG, etag_value(tag));
    no_cache(h);
    r
}

/// A `ServerList` of `entries`: `304` when the caller holds its `ETag`
/// (nothing rendered), else the body, from the documents' cached views,
/// serialized on the CPU pool.
pub(super) async fn list_response(
    st: &RegistryState,
    tenant: &TenantId,
    modes: EnforcementModes,
    entries: Vec<Entry>,
    next: Option<(String, String)>,
    inm: Option<&HeaderValue>,
) -> Result<Response, ApiError> {
    let tag = etag::list_etag(&entries, &modes, next.as_ref());
    if let Some(r) = not_modified_if(inm, &tag) {
        return Ok(r);
    }
    let views = views::views(st, tenant, &entries).await?;
    let tenant = tenant.clone();
    let body = offload(move || {
        let servers: Vec<ServerResponse> = entries
            .iter()
            .zip(&views)
            .map(|(e, v)| response::response(e, v, &tenant, &modes))
            .collect();
        let list = ServerList {
            metadata: ListMetadata {
                next_cursor: next.map(|(k, v)| cursor_for(&k, &v)),
                count: servers.len(),
            },
            servers,
        };
        serde_json::to_vec(&list).map_err(|_| ApiError::internal())
    })
    .await??;
    Ok(respond(body, &tag))
}
