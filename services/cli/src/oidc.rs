//! GitHub Actions OIDC: a short-lived, audience-bound token for Pinfold,
//! requested from the Actions runtime, so a workflow publishes without a
//! long-lived secret.
//!
//! A job granted `permissions: id-token: write` gets two environment
//! variables: `ACTIONS_ID_TOKEN_REQUEST_URL` (already carrying a query,
//! `?api-version=2.0`) and `ACTIONS_ID_TOKEN_REQUEST_TOKEN`. A `GET` of that
//! URL with `&audience=AUD` added and `Authorization: bearer <request
//! token>` answers `{"value": "<JWT>"}`: a token issued by
//! `https://token.actions.githubusercontent.com` for that audience, whose
//! claims (`repository`, `repository_owner`, `job_workflow_ref`, `ref`, ...)
//! Pinfold maps to a tenant and roles by the issuer's configured rules.
//!
//! Neither the request token nor the issued token is ever printed: both are
//! [`Token`]s.

use std::fmt;
use std::time::Duration;

use reqwest::header::{ACCEPT, AUTHORIZATION};
use serde::Deserialize;
use url::Url;

use crate::remote::{RemoteError, Reply, Token, one_line};
use crate::retry::{self, RetryPolicy};

/// The variable holding the token endpoint's URL.
pub const REQUEST_URL_VAR: &str = "ACTIONS_ID_TOKEN_REQUEST_URL";
/// The variable holding the bearer token for that endpoint.
pub const REQUEST_TOKEN_VAR: &str = "ACTIONS_ID_TOKEN_REQUEST_TOKEN";

/// Largest token endpoint answer read (an ID token is a few KiB).
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// Why no Actions ID token could be obtained.
#[derive(Debug, thiserror::Error)]
pub enum OidcError {
    /// A variable is unset or empty: not in Actions, or the job may not ask.
    #[error(
        "{0} is not set: GitHub Actions provides {REQUEST_URL_VAR} and {REQUEST_TOKEN_VAR} only to jobs granted `permissions: id-token: write`; add it to the workflow or the job"
    )]
    NotAvailable(&'static str),
    /// The request URL is not an absolute http(s) URL.
    #[error("{REQUEST_URL_VAR} is not an absolute http(s) URL")]
    BadUrl,
    /// The audience is empty.
    #[error("the OIDC audience must not be empty")]
    NoAudience,
    /// The endpoint could not be reached.
    #[error("the Actions token endpoint is unreachable: {0}")]
    Unreachable(String),
    /// The endpoint answered with an error status.
    #[error("the Actions token endpoint refused the request: HTTP {status}{detail}")]
    Refused {
        /// The status code.
        status: u16,
        /// `": <message>"` from the answer, or empty.
        detail: String,
    },
    /// The answer carries no token.
    #[error(
        "the Actions token endpoint's answer carries no token (expected {{\"value\": \"<JWT>\"}})"
    )]
    BadAnswer,
}

/// Where and how to ask the Actions runtime for an ID token.
#[derive(Clone)]
pub struct ActionsRuntime {
    url: Url,
    token: Token,
}

impl fmt::Debug for ActionsRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The URL's query may hold per-run identifiers; say only where it goes.
        f.debug_struct("ActionsRuntime")
            .field("host", &self.url.host_str())
            .field("token", &self.token)
            .finish()
    }
}

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    value: Option<String>,
}

impl ActionsRuntime {
    /// Reads [`REQUEST_URL_VAR`] and [`REQUEST_TOKEN_VAR`].
    pub fn from_env() -> Result<ActionsRuntime, OidcError> {
        let read = |var: &'static str| {
            std::env::var(var)
                .ok()
                .filter(|v| !v.trim().is_empty())
                .ok_or(OidcError::NotAvailable(var))
        };
        let url = read(REQUEST_URL_VAR)?;
        let token = read(REQUEST_TOKEN_VAR)?;
        ActionsRuntime::new(&url, &token)
    }

    /// A runtime at `url` with the request token `token`.
    pub fn new(url: &str, token: &str) -> Result<ActionsRuntime, OidcError> {
        let url = Url::parse(url.trim()).map_err(|_| OidcError::BadUrl)?;
        if !matches!(url.scheme(), "http" | "https") || url.cannot_be_a_base() {
            return Err(OidcError::BadUrl);
        }
        let token = Token::new(token).ok_or(OidcError::NotAvailable(REQUEST_TOKEN_VAR))?;
        Ok(ActionsRuntime { url, token })
    }

    /// The request URL for `audience`: the runtime's URL with `audience`
    /// appended to whatever query it already has, percent-encoded.
    pub fn request_url(&self, audience: &str) -> Url {
        let mut url = self.url.clone();
        url.query_pairs_mut().append_pair("audience", audience);
        url
    }

    /// Asks for an ID token for `audience` (transport failures and 5xx are
    /// retried a few times, as the Actions toolkit does).
    pub async fn id_token(&self, audience: &str, timeout: Duration) -> Result<Token, OidcError> {
        if audience.trim().is_empty() {
            return Err(OidcError::NoAudience);
        }
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(5).min(timeout))
            .timeout(timeout)
            .user_agent(concat!("pinfold-cli/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| OidcError::Unreachable(one_line(&e)))?;
        let url = self.request_url(audience);
        let mut shown = url.clone();
        shown.set_query(None);
        let outcome = retry::run(
            RetryPolicy {
                attempts: 3,
                ..RetryPolicy::default()
            },
            || {
                let req = http
                    .get(url.clone())
                    .header(AUTHORIZATION, format!("bearer {}", self.token.expose()))
                    .header(ACCEPT, "application/json; api-version=2.0");
                let shown = shown.clone();
                async move {
                    let unreachable = |e: reqwest::Error| RemoteError::Unreachable {
                        url: shown.to_string(),
                        reason: one_line(&e.without_url()),
                    };
                    let resp = req.send().await.map_err(unreachable)?;
                    let status = resp.status();
                    let headers = resp.headers().clone();
                    let body = resp.bytes().await.map_err(unreachable)?;
                    Ok(Reply {
                        status,
                        headers,
                        body,
                    })
                }
            },
            |_, _, _| {},
        )
        .await;
        let reply = match outcome.result {
            Ok(r) => r,
            Err(RemoteError::Unreachable { url, reason }) => {
                return Err(OidcError::Unreachable(format!("{url}: {reason}")));
            }
            Err(e) => return Err(OidcError::Unreachable(e.to_string())),
        };
        if !reply.status.is_success() {
            // The endpoint's error bodies are short JSON or text; show a
            // bounded, single-line excerpt (never the request token, which
            // the endpoint does not echo).
            let text = String::from_utf8_lossy(&reply.body[..reply.body.len().min(200)])
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            return Err(OidcError::Refused {
                status: reply.status.as_u16(),
                detail: if text.is_empty() {
                    String::new()
                } else {
                    format!(": {text}")
                },
            });
        }
        if reply.body.len() > MAX_ANSWER_BYTES {
            return Err(OidcError::BadAnswer);
        }
        let answer: Answer =
            serde_json::from_slice(&reply.body).map_err(|_| OidcError::BadAnswer)?;
        answer
            .value
            .as_deref()
            .and_then(Token::new)
            .ok_or(OidcError::BadAnswer)
    }
}

/// `--github-oidc [--audience AUD]`, shared by the commands that talk to
/// Pinfold (`publish`, `verify`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct OidcArgs {
    /// Authenticate with a GitHub Actions OIDC token instead of --token-env
    /// (the job needs `permissions: id-token: write`): no long-lived secret.
    #[arg(long, conflicts_with = "token_env")]
    pub github_oidc: bool,
    /// Audience of the OIDC token: the `audience` of the issuer in Pinfold's
    /// configuration [default: the --server URL].
    #[arg(long, value_name = "AUD", requires = "github_oidc")]
    pub audience: Option<String>,
}

impl OidcArgs {
    /// The audience to ask for: `--audience`, else the server URL without a
    /// trailing slash.
    pub fn audience_for(&self, server: &str) -> String {
        self.audience
            .clone()
            .unwrap_or_else(|| server.trim_end_matches('/').to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_audience_is_appended_to_the_existing_query() {
        let rt = ActionsRuntime::new(
            "https://pipelines.actions.example/abc/idtoken?api-version=2.0",
            "req-token",
        )
        .unwrap();
        assert_eq!(
            rt.request_url("https://pinfold.example").as_str(),
            "https://pipelines.actions.example/abc/idtoken?api-version=2.0&audience=https%3A%2F%2Fpinfold.example"
        );
        let bare = ActionsRuntime::new("http://127.0.0.1:9/token", "t").unwrap();
        assert_eq!(
            bare.request_url("a b&c").as_str(),
            "http://127.0.0.1:9/token?audience=a+b%26c"
        );
    }

    #[test]
    fn bad_urls_and_empty_tokens_are_refused() {
        for bad in ["", "not a url", "ftp://x/y", "mailto:a@b"] {
            assert!(matches!(
                ActionsRuntime::new(bad, "t"),
                Err(OidcError::BadUrl)
            ));
        }
        assert!(matches!(
            ActionsRuntime::new("https://x/y", " \n"),
            Err(OidcError::NotAvailable(REQUEST_TOKEN_VAR))
        ));
    }

    #[test]
    fn the_missing_variable_message_names_the_permission() {
        let msg = OidcError::NotAvailable(REQUEST_URL_VAR).to_string();
        assert!(
            msg.contains("ACTIONS_ID_TOKEN_REQUEST_URL is not set"),
            "{msg}"
        );
        assert!(msg.contains("permissions: id-token: write"), "{msg}");
    }

    #[test]
    fn the_request_token_never_prints() {
        let rt = ActionsRuntime::new("https://x.example/t?q=secret-run", "very-secret").unwrap();
        let shown = format!("{rt:?}");
        assert!(!shown.contains("very-secret"), "{shown}");
        assert!(!shown.contains("secret-run"), "{shown}");
    }
}
