//! signet-resolve: the resolve-cache service: Signet resolve sessions, the per-session cache of tools/resolve results, and the upstream MCP client. Its routes arrive with the resolve issue; today the crate only reserves its place in the dependency graph.
//!
//! Like every service crate it may depend on `signet-core` and `signet-http`,
//! never on another service crate and never on SQL.
