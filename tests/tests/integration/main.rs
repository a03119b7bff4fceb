//! The integration suite: one binary, run on SQLite by default and on
//! PostgreSQL when `PINFOLD_TEST_DATABASE_URL` is set.

mod auth;
mod capture;
mod cli;
mod console;
mod contract;
mod egress;
mod faults;
mod guard_http;
mod guard_routes;
mod guard_stdio;
mod input;
mod isolation;
mod keys;
mod limits;
mod mcp_peers;
mod metrics_access;
mod ops;
mod publish;
mod registry;
mod registry_realdata;
mod repo;
mod resolve;
mod rls;
mod scope;
mod scope_grants;
mod scope_oidc;
mod services;
mod sessions;
mod signature_cli;
mod slow_clients;
mod smoke;
mod storage;
mod telemetry;
mod tenants;
mod v01;
