//! Secrets at rest, and attestations.
//!
//! The server is configured with one current encryption key (the *master
//! key*) and any number of old ones. Every secret Pinfold stores (each
//! tenant's attestation private key, resolve sessions' upstream headers,
//! scope providers' client secrets, pending grants' PKCE verifiers) is
//! sealed with AES-256-GCM under a key derived from the current master key
//! for the tenant and the purpose of the value (HKDF-SHA256, RFC 5869), and
//! carries the id of the master key it was sealed under, so values sealed
//! under an old key still open while they are re-sealed under the new one
//! (`pinfold keys reseal`).
//!
//! Layers from the bottom: `error`; `sealed` (the text format of a sealed
//! value); `master` (one master key: its id and the keys derived from it);
//! `keyring` (the current and old master keys: seal, open, re-seal, tenant
//! key generation); `attestation` (signed attestations and the JWKS).

mod attestation;
mod error;
mod keyring;
mod master;
mod sealed;

pub use attestation::{AttestationClaims, jwks, sign_attestation};
pub use error::KeyError;
pub use keyring::{Keyring, Resealed};
pub use sealed::{FORMAT_VERSION, key_id_of};
