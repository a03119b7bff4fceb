//! signet-registry: the registry service: publishing immutable capability signatures, review and trust, cards, diff, verify, attestations. Its store trait and routes arrive with the registry issue; today the crate only reserves its place in the dependency graph.
//!
//! Like every service crate it may depend on `signet-core` and `signet-http`,
//! never on another service crate and never on SQL.
