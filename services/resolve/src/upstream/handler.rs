//! What the client tells an upstream about itself (its name, version and
//! the tool-resolution extension among its capabilities), and what it does
//! when the upstream says its tool list changed (the hook the engine gives).

use std::sync::Arc;

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::NotificationContext;
use rmcp::{ClientHandler, RoleClient};
use serde_json::Map;

use pinfold_resolve_check::prepared::TOOL_RESOLUTION;

/// Called when the upstream says its tool list changed.
pub(crate) type ListChangedHook = Arc<dyn Fn() + Send + Sync>;

pub(super) struct Handler {
    pub(super) info: ClientConfig,
    pub(super) on_list_changed: ListChangedHook,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        (self.on_list_changed)();
    }
}

pub(super) fn client_info() -> ClientConfig {
    let mut caps = ClientCapabilities::default();
    let mut ext = std::collections::BTreeMap::new();
    ext.insert(TOOL_RESOLUTION.to_owned(), Map::new());
    caps.extensions = Some(ext);
    let mut info = ClientConfig::new(
        caps,
        Implementation::new("pinfold-resolve", env!("CARGO_PKG_VERSION")),
    );
    info.protocol_version = ProtocolVersion::V_2025_11_25;
    info
}
