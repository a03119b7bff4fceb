//! The one-sentence reason a plan gives for each call's choice.

use super::alternatives::CallAlts;
use super::bits::{count, count_new};

/// Why call `c` took alternative `k`, in one sentence: `m` is what the
/// alternative adds beyond the grant, `others` what the rest of the plan
/// holds without this call.
pub(super) fn reason_for(c: &CallAlts<'_>, k: usize, m: &[u64], others: &[u64]) -> String {
    let alt = &c.alts[k];
    if let Some(why) = c.defaulted {
        return if alt.scopes.is_empty() {
            format!("{why}: the provider has no default scopes, nothing to request")
        } else {
            format!("{why}: the provider's default scopes apply")
        };
    }
    let n = c.alts.len();
    let j = alt.index.unwrap_or_default();
    if alt.noauth {
        return format!("alternative {j} is noauth: callable without credentials");
    }
    if count(m) == 0 && !alt.scopes.is_empty() {
        return format!("alternative {j}: already covered by the granted scopes");
    }
    if alt.scopes.is_empty() {
        return format!("alternative {j} is oauth2 without scopes: a token, no scope");
    }
    if n == 1 {
        return format!("alternative {j} is the only oauth2 alternative");
    }
    let added = count_new(m, others);
    if added == 0 {
        format!("alternative {j} of {n}: covered by the scopes other calls need")
    } else {
        format!("alternative {j} of {n}: the least added privilege ({added} scope(s))")
    }
}
