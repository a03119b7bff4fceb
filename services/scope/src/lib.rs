//! signet-scope
