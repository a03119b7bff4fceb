//! Why an outbound request failed, as callers may see it: "not allowed" or
//! "unreachable", never which port answered what.

/// Why an outbound request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EgressError {
    /// Not an absolute `http(s)` URL with a host and without user info.
    #[error("not an absolute http(s) URL without credentials")]
    InvalidUrl,
    /// The address policy refuses every address of the destination.
    #[error("not allowed by the egress policy")]
    NotAllowed,
    /// Credentials would travel over plain `http://` to a host the
    /// allow-list does not name.
    #[error("credentials are sent over plain http only to hosts the egress allow-list names")]
    PlainCredentials,
    /// No connection could be made, or the exchange broke off. Deliberately
    /// one case: a refused port, a filtered one and a name that does not
    /// resolve look the same to the caller.
    #[error("unreachable")]
    Unreachable,
    /// The answer did not come within the total timeout.
    #[error("timed out")]
    TimedOut,
    /// The answer was a redirect, which is never followed.
    #[error("answered with a redirect (HTTP {0}), which is not followed")]
    Redirect(u16),
    /// The answer, or one event of it, was larger than the limit.
    #[error("answered more than {0} bytes")]
    TooLarge(usize),
    /// The HTTP client could not be built (a TLS setup failure).
    #[error("cannot build an HTTP client: {0}")]
    Client(String),
}

/// The error the policy resolver fails a connection with, found again in
/// reqwest's error chain by [`EgressError::of`].
#[derive(Debug)]
pub(crate) struct NotAllowed;

impl std::fmt::Display for NotAllowed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("not allowed by the egress policy")
    }
}

impl std::error::Error for NotAllowed {}

impl EgressError {
    /// What a reqwest error means to the caller.
    pub fn of(e: &reqwest::Error) -> EgressError {
        if refused_by_policy(e) {
            return EgressError::NotAllowed;
        }
        if e.is_timeout() && !e.is_connect() {
            return EgressError::TimedOut;
        }
        EgressError::Unreachable
    }

    /// Whether this is the policy's refusal.
    pub fn is_not_allowed(&self) -> bool {
        matches!(
            self,
            EgressError::NotAllowed | EgressError::PlainCredentials
        )
    }
}

/// Whether the policy resolver refused the connection, anywhere in the
/// chain of `e`.
pub fn refused_by_policy(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(x) = cur {
        if x.is::<NotAllowed>() {
            return true;
        }
        cur = x.source();
    }
    false
}
