//! What can go wrong with keys and sealed values. No message ever carries
//! key material or a sealed or opened value; a key id is not secret.

/// Key failures.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// A configured encryption key has the wrong length or encoding.
    #[error("the encryption key must be 32 bytes, base64-encoded")]
    BadServerKey,
    /// Two configured encryption keys have the same id (the same key
    /// listed twice, or an old key equal to the current one).
    #[error("encryption key {0} is configured twice")]
    DuplicateKey(String),
    /// A sealed value names a master key that is not configured, neither
    /// as the current key nor as an old one.
    #[error(
        "a sealed value was sealed under encryption key {0}, which is not configured (neither current nor old)"
    )]
    UnknownKey(String),
    /// A sealed value did not open: the wrong key, another tenant or
    /// context, a malformed or tampered value.
    #[error(
        "a sealed value could not be opened (wrong encryption key, or a malformed or tampered value)"
    )]
    Unseal,
    /// Crypto failure.
    #[error("cryptographic failure: {0}")]
    Crypto(String),
}
