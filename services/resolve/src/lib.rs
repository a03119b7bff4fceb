//! signet-resolve
