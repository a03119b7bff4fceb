//! signet-scope: the scope service: OAuth provider profiles, the least-privilege scope planner, and authorization requests. Its routes arrive with the scope issue; today the crate only reserves its place in the dependency graph.
//!
//! Like every service crate it may depend on `signet-core` and `signet-http`,
//! never on another service crate and never on SQL.
