//! Token verification cost: a cache hit (target ≤ 2 µs) and a full EdDSA
//! verification on a miss (target ≤ 25 µs); targets in bench/README.md.

// criterion_group! generates undocumented functions.
#![allow(missing_docs)]

use std::hint::black_box;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair as _};
use base64::Engine as _;
use criterion::{Criterion, criterion_group, criterion_main};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header};
use pinfold_http::Authenticator;
use pinfold_http::auth::JwksFetch;
use pinfold_http::auth::{ClaimMapping, IssuerConfig, KeySource};

fn bench(c: &mut Criterion) {
    let doc = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap();
    let public = Ed25519KeyPair::from_pkcs8(doc.as_ref())
        .unwrap()
        .public_key()
        .as_ref()
        .to_vec();
    let x = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(public);
    let issuer = || IssuerConfig {
        issuer: "https://issuer.bench".into(),
        audience: "pinfold".into(),
        algorithms: vec![Algorithm::EdDSA],
        keys: KeySource::Static(DecodingKey::from_ed_components(&x).unwrap()),
        mapping: ClaimMapping::FromToken,
    };
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 3600;
    let token = jsonwebtoken::encode(
        &Header::new(Algorithm::EdDSA),
        &serde_json::json!({"iss": "https://issuer.bench", "aud": "pinfold", "sub": "bench", "tenant": "acme", "roles": ["reader"], "exp": exp}),
        &EncodingKey::from_ed_der(doc.as_ref()),
    )
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();

    let cached = Authenticator::new(vec![issuer()], 30, JwksFetch::public_only());
    rt.block_on(cached.verify(&token)).unwrap();
    c.bench_function("auth/verify cached token", |b| {
        b.iter(|| rt.block_on(cached.verify(black_box(&token))).unwrap())
    });

    c.bench_function("auth/verify EdDSA token (cache miss)", |b| {
        b.iter_batched(
            || Authenticator::new(vec![issuer()], 30, JwksFetch::public_only()),
            |fresh| {
                let p = rt.block_on(fresh.verify(black_box(&token))).unwrap();
                // Returned, so the authenticator is dropped outside the timing.
                (fresh, p)
            },
            criterion::BatchSize::SmallInput,
        )
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
