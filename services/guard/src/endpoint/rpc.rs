//! JSON-RPC messages as the endpoint writes and rewrites them.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use pinfold_core::guard::PINFOLD_META_PREFIX;
use pinfold_http::problem::NotAProblem;
use serde_json::{Value, json};

/// A JSON-RPC error object.
pub fn error_object(code: i64, message: &str) -> Value {
    json!({"code": code, "message": message})
}

/// A response carrying `result` for `id`.
pub fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// A response carrying `error` for `id`.
pub fn error(id: &Value, error: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

/// A JSON body with `status`: a JSON-RPC message, not a problem document
/// (the edge leaves it as it is).
pub fn json_response(status: StatusCode, body: &Value) -> Response {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut resp = (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        bytes,
    )
        .into_response();
    resp.extensions_mut().insert(NotAProblem);
    resp
}

/// An HTTP error whose body is a JSON-RPC error without an id (the
/// transport's own errors: a batch, a body that is not JSON, an unknown
/// session).
pub fn transport_error(status: StatusCode, code: i64, message: &str) -> Response {
    json_response(status, &error(&Value::Null, error_object(code, message)))
}

/// Removes every `_meta` member under Pinfold's reserved prefix from a
/// message an upstream sent: only the guard speaks for Pinfold, so an
/// upstream cannot pass an item off as reviewed. Walks at most 64 levels.
pub fn strip_reserved_meta(v: &mut Value) {
    fn walk(v: &mut Value, depth: usize) {
        if depth > 64 {
            return;
        }
        match v {
            Value::Object(m) => {
                if let Some(Value::Object(meta)) = m.get_mut("_meta") {
                    meta.retain(|k, _| !k.starts_with(PINFOLD_META_PREFIX));
                }
                for (_, child) in m.iter_mut() {
                    walk(child, depth + 1);
                }
            }
            Value::Array(a) => {
                for child in a {
                    walk(child, depth + 1);
                }
            }
            _ => {}
        }
    }
    walk(v, 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_meta_is_stripped_at_every_depth_and_other_keys_stay() {
        let mut m = json!({"jsonrpc": "2.0", "id": 1, "result": {
            "_meta": {"io.github.pinfold/guard": {"reviewed": true}, "traceparent": "x"},
            "content": [{"type": "text", "text": "hi",
                "_meta": {"io.github.pinfold/x": 1, "other/y": 2}}]}});
        strip_reserved_meta(&mut m);
        assert_eq!(m["result"]["_meta"], json!({"traceparent": "x"}));
        assert_eq!(m["result"]["content"][0]["_meta"], json!({"other/y": 2}));
    }
}
