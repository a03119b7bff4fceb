//! pinfold-server: the `pinfold` binary's library.
//!
//! It owns configuration, startup and shutdown, the composition of the
//! service routers into one application, the OpenAPI document, metrics,
//! logging and the command line. It wires the concrete stores into the
//! services' traits; it holds no business rule of its own.

pub mod app;
pub mod cli;
pub mod config;
pub mod conn_timer;
pub mod console_wiring;
pub mod contract;
pub mod devkeys;
pub mod edge;
pub mod egress_wiring;
pub mod fastpath;
pub mod guard_wiring;
pub mod metrics;
pub mod policy_cache;
pub mod protected_resource;
pub mod purge;
pub mod rate_limits;
pub mod registry_wiring;
pub mod reseal;
pub mod resolve_wiring;
pub mod scope_wiring;
pub mod scrape;
pub mod sealer;
pub mod serve;
pub mod services;
pub mod signature_cmd;
pub mod store;
pub mod telemetry;
pub mod url_policy;
