//! The console's pages, each a function from plain view data to an HTML
//! document. Every value is interpolated through `maud`, which escapes it;
//! nothing here writes raw HTML from data.
//!
//! - `layout`: the page shell (head, skip link, navigation, sign-out form)
//!   and the console's URLs.
//! - `version`: a version: escalations first, the decision forms, the
//!   attestation, every tool with its chips, prompts, resources and
//!   templates, then the changes against the approved version side by side.
//! - `queue`: pending versions, oldest first, with each change's headline.
//! - `audit`: the audit log with its filters.
//! - `ledger`: resolve sessions and grants, over-privileged grants flagged.
//! - `signin`: the sign-in page and the messages pages.

pub mod audit;
pub mod layout;
pub mod ledger;
pub mod queue;
pub mod signin;
pub mod version;

pub use layout::{Nav, Shell};
