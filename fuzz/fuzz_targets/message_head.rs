//! The guard's reading of a client message's head (`pinfold-guard`'s
//! `endpoint::head` module, built here from its source file alone: it
//! depends only on pinfold-core, serde and serde_json).
//!
//! For any body: whenever the one-pass scanner gives a head, serde reads
//! the body as a message too and gives the same head (method, id as
//! written, name, uri, protocol version, the extension); and reading never
//! panics.
#![no_main]

#[path = "../../services/guard/src/endpoint/head.rs"]
pub mod head;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(scanned) = head::scan(data) {
        assert_eq!(
            Ok(scanned),
            head::parse(data),
            "the scanner and serde disagree on {:?}",
            String::from_utf8_lossy(data)
        );
    }
    let _ = head::read(data);
});
