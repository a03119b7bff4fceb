//! signet-registry
