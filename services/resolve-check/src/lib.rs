//! pinfold-resolve-check: what the resolve service computes without IO,
//! in a crate of its own so the fuzz targets build it without the
//! service's HTTP, upstream and cache dependencies.
//!
//! - [`key`]: the cache key of a call (tenant, session, tool, RFC 8785
//!   bytes of the arguments) and its fingerprint;
//! - [`prepared`]: a signature version prepared once per digest: per tool
//!   its worst case, how it resolves, its compiled input-schema validator,
//!   the check of an upstream result and the tool served for it.

pub mod key;
pub mod prepared;

pub use key::CacheKey;
pub use prepared::{PreparedSignature, PreparedTool, TOOL_RESOLUTION, ToolKind};
