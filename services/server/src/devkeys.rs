//! The development signing key and token minting.
//!
//! In dev mode Pinfold signs its own tokens with an Ed25519 key generated once
//! into the data directory (`dev-signing-key.p8`, PKCS#8, mode 0600). The
//! matching issuer is `pinfold-dev` with audience `pinfold`. Never use dev mode
//! on a network-facing deployment: anyone with the data directory can mint
//! tokens.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair as _};
use base64::Engine as _;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header};
use serde::Serialize;

/// Issuer of dev tokens.
pub const DEV_ISSUER: &str = "pinfold-dev";
/// Audience of dev tokens.
pub const DEV_AUDIENCE: &str = "pinfold";
const KEY_FILE: &str = "dev-signing-key.p8";

/// A loaded dev key.
pub struct DevKey {
    pkcs8: Vec<u8>,
    public_x: String,
    /// Where it lives.
    pub path: PathBuf,
    /// Whether this call created it.
    pub created: bool,
}

impl DevKey {
    /// Loads the key from `data_dir`, generating it if absent.
    pub fn load_or_create(data_dir: &Path) -> anyhow::Result<DevKey> {
        let path = data_dir.join(KEY_FILE);
        let (pkcs8, created) = if path.exists() {
            (
                std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?,
                false,
            )
        } else {
            std::fs::create_dir_all(data_dir)
                .with_context(|| format!("creating data directory {}", data_dir.display()))?;
            let doc = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new())
                .map_err(|_| anyhow::anyhow!("could not generate an Ed25519 key"))?;
            let bytes = doc.as_ref().to_vec();
            write_private(&path, &bytes)?;
            (bytes, true)
        };
        let pair = Ed25519KeyPair::from_pkcs8(&pkcs8)
            .map_err(|_| anyhow::anyhow!("{} is not an Ed25519 PKCS#8 key", path.display()))?;
        let public_x =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(pair.public_key().as_ref());
        Ok(DevKey {
            pkcs8,
            public_x,
            path,
            created,
        })
    }

    /// Loads the key from `data_dir`, failing if absent.
    pub fn load(data_dir: &Path) -> anyhow::Result<DevKey> {
        if !data_dir.join(KEY_FILE).exists() {
            bail!(
                "no dev signing key in {}; run `pinfold serve --data-dir {}` once (it creates one)",
                data_dir.display(),
                data_dir.display()
            );
        }
        Self::load_or_create(data_dir)
    }

    /// The verification key.
    pub fn decoding_key(&self) -> anyhow::Result<DecodingKey> {
        DecodingKey::from_ed_components(&self.public_x).context("dev public key")
    }

    /// Signs a token.
    pub fn mint(
        &self,
        sub: &str,
        tenant: Option<&str>,
        roles: &[&str],
        ttl: Duration,
    ) -> anyhow::Result<String> {
        #[derive(Serialize)]
        struct Claims<'a> {
            iss: &'a str,
            aud: &'a str,
            sub: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            tenant: Option<&'a str>,
            roles: &'a [&'a str],
            iat: u64,
            nbf: u64,
            exp: u64,
        }
        let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
        let claims = Claims {
            iss: DEV_ISSUER,
            aud: DEV_AUDIENCE,
            sub,
            tenant,
            roles,
            iat: now,
            nbf: now,
            exp: now + ttl.as_secs(),
        };
        let mut header = Header::new(Algorithm::EdDSA);
        header.typ = Some("JWT".into());
        Ok(jsonwebtoken::encode(
            &header,
            &claims,
            &EncodingKey::from_ed_der(&self.pkcs8),
        )?)
    }
}

/// Writes a new file readable only by its owner (mode 0600 on Unix).
pub fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        opts.mode(0o600);
    }
    let mut f = opts
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    f.write_all(bytes)?;
    f.sync_all()?;
    Ok(())
}

/// Parses durations like `90s`, `30m`, `1h`, `7d`.
pub fn parse_ttl(s: &str) -> anyhow::Result<Duration> {
    let s = s.trim();
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num
        .parse()
        .map_err(|_| anyhow::anyhow!("ttl {s:?}: expected a number with a unit, like 1h or 30m"))?;
    let secs = match unit {
        "" | "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        "d" => n * 86_400,
        _ => bail!("ttl {s:?}: unit must be s, m, h or d"),
    };
    if secs == 0 || secs > 366 * 86_400 {
        bail!("ttl {s:?}: must be between 1 second and 366 days");
    }
    Ok(Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls() {
        assert_eq!(parse_ttl("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_ttl("90").unwrap(), Duration::from_secs(90));
        assert!(parse_ttl("1y").is_err());
        assert!(parse_ttl("h").is_err());
        assert!(parse_ttl("0s").is_err());
    }
}
