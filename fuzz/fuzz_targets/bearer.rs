//! The bearer-token pre-parser (`pinfold-http`'s `bearer` module, built here
//! from its source file alone: it depends on nothing of pinfold-http).
//!
//! For any header bytes: a `Bearer` answer means the header starts with the
//! scheme (any case) followed by a space or nothing, and the token is the
//! rest without surrounding ASCII white space; a token splits into three
//! segments exactly when it holds two dots, and joins back to itself; a
//! payload that decodes re-encodes to the same text (base64url without
//! padding is canonical); and a token built from the input's claims gives
//! those claims and their `iss` back.
#![no_main]

#[path = "../../services/http/src/bearer.rs"]
pub mod bearer;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bearer::{Credentials, issuer, jwt_segments, payload_claims, split_authorization};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    match split_authorization(data) {
        Credentials::Bearer(token) => {
            assert!(data.len() >= 6 && data[..6].eq_ignore_ascii_case(b"bearer"));
            assert!(
                data.len() == 6 || data[6] == b' ',
                "scheme not ended by a space"
            );
            assert_eq!(token.trim_ascii(), token, "token not trimmed");
            if !token.is_empty() {
                // The token is a slice of the header, after the scheme.
                let start = token.as_ptr() as usize - data.as_ptr() as usize;
                assert!(start >= 7 && start + token.len() <= data.len());
                assert!(data[7..start].iter().all(u8::is_ascii_whitespace));
                assert!(
                    data[start + token.len()..]
                        .iter()
                        .all(u8::is_ascii_whitespace)
                );
            }
        }
        Credentials::OtherScheme => {
            let scheme_end = data.iter().position(|b| *b == b' ').unwrap_or(data.len());
            assert!(!data[..scheme_end].eq_ignore_ascii_case(b"bearer"));
        }
    }

    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let dots = text.bytes().filter(|b| *b == b'.').count();
    match jwt_segments(text) {
        Ok(segments) => {
            assert_eq!(dots, 2);
            assert_eq!(segments.join("."), text, "segments do not join back");
            if let Ok(claims) = payload_claims(segments[1]) {
                let raw = URL_SAFE_NO_PAD.decode(segments[1]).expect("decoded once");
                assert_eq!(
                    URL_SAFE_NO_PAD.encode(&raw),
                    segments[1],
                    "non-canonical base64url"
                );
                let _ = issuer(&claims);
            }
        }
        Err(_) => assert_ne!(dots, 2),
    }

    // Construct and recover: the input as the claims of a token.
    if let Ok(Value::Object(claims)) = serde_json::from_slice::<Value>(data) {
        let payload = URL_SAFE_NO_PAD.encode(data);
        let token = format!("eyJhbGciOiJFZERTQSJ9.{payload}.c2ln");
        let header = format!("BeArEr \t{token} ");
        let Credentials::Bearer(got) = split_authorization(header.as_bytes()) else {
            panic!("a bearer header was not recognised");
        };
        assert_eq!(got, token.as_bytes());
        let [_, p, _] = jwt_segments(&token).expect("three segments");
        let back = payload_claims(p).expect("claims decode");
        assert_eq!(back, claims);
        match (issuer(&back), claims.get("iss")) {
            (Ok(iss), Some(Value::String(want))) => assert_eq!(iss, want),
            (Err(_), Some(Value::String(_))) => panic!("a string iss was refused"),
            (Ok(_), _) => panic!("an iss that is not a string was accepted"),
            (Err(_), _) => {}
        }
    }
});
