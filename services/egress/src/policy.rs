//! The address policy: which addresses an outbound request may connect
//! to, and the allow-list a tenant (or the operator) widens it with.
//!
//! By default only public unicast addresses pass. Refused, whatever name
//! led to them:
//!
//! - IPv4: `0.0.0.0/8` (this network, the unspecified address), loopback
//!   `127.0.0.0/8`, private `10/8`, `172.16/12`, `192.168/16` (RFC 1918),
//!   shared address space `100.64/10` (RFC 6598, carrier-grade NAT),
//!   link-local `169.254/16` (where cloud metadata services answer),
//!   `192.0.0.0/24` (IETF protocol assignments), the documentation and
//!   benchmarking ranges, multicast `224/4`, reserved `240/4` and the
//!   broadcast address;
//! - IPv6: unspecified `::`, loopback `::1`, unique-local `fc00::/7`,
//!   link-local `fe80::/10`, the deprecated site-local `fec0::/10`,
//!   multicast `ff00::/8`, documentation `2001:db8::/32`, discard
//!   `100::/64`, Teredo `2001::/32`; and every form that carries an IPv4
//!   address inside (IPv4-mapped `::ffff:a.b.c.d`, IPv4-compatible
//!   `::a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) is judged by the
//!   IPv4 address it carries.
//!
//! An [`AllowList`] names what a tenant's internal servers and identity
//! providers are: host names (`notes.internal.example`), suffix patterns
//! (`*.corp.example`: any name below `corp.example`, not the name itself),
//! IP addresses and CIDR blocks. A named host may resolve to any address;
//! an address or block lets any name that resolves into it through.
//! Loopback is allowed only by the operator's own setting ([`Rules`]),
//! never by anything a tenant writes short of naming it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use ipnet::IpNet;
use url::Host;

/// The most entries an allow-list may hold.
pub const MAX_ENTRIES: usize = 64;

/// The longest entry (a DNS name is at most 253 characters).
const MAX_ENTRY_LEN: usize = 253;

/// Why an allow-list entry was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllowListError {
    /// More than [`MAX_ENTRIES`] entries.
    #[error("at most {MAX_ENTRIES} entries")]
    TooMany,
    /// An entry that is neither a host name, a `*.suffix` pattern, an IP
    /// address nor a CIDR block.
    #[error(
        "entry {index} ({entry:?}) is not a host name, a *.suffix pattern, an IP address or a CIDR block"
    )]
    Invalid {
        /// Its position in the list.
        index: usize,
        /// The entry as given (cut to 64 characters).
        entry: String,
    },
}

/// A parsed allow-list: names, suffixes and address blocks, each kept in a
/// canonical form (lowercase names without a trailing dot; blocks with
/// their host bits cleared, IPv4-mapped IPv6 blocks as IPv4).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct AllowList {
    hosts: Vec<String>,
    /// Each with its leading dot (`.corp.example`).
    suffixes: Vec<String>,
    nets: Vec<IpNet>,
}

impl AllowList {
    /// Parses entries (see the module documentation for their forms).
    pub fn parse<'a>(entries: impl IntoIterator<Item = &'a str>) -> Result<Self, AllowListError> {
        let mut out = AllowList::default();
        for (index, raw) in entries.into_iter().enumerate() {
            if index >= MAX_ENTRIES {
                return Err(AllowListError::TooMany);
            }
            let invalid = || AllowListError::Invalid {
                index,
                entry: raw.chars().take(64).collect(),
            };
            let e = raw.trim().to_ascii_lowercase();
            if e.is_empty() || e.len() > MAX_ENTRY_LEN {
                return Err(invalid());
            }
            if let Some(rest) = e.strip_prefix("*.") {
                let name = dns_name(rest).ok_or_else(invalid)?;
                out.suffixes.push(format!(".{name}"));
            } else if let Ok(ip) = e.trim_matches(['[', ']']).parse::<IpAddr>() {
                out.nets.push(IpNet::from(canonical(ip)));
            } else if e.contains('/') {
                let net: IpNet = e.parse().map_err(|_| invalid())?;
                out.nets.push(canonical_net(net.trunc()));
            } else {
                let name = dns_name(&e).ok_or_else(invalid)?;
                out.hosts.push(name);
            }
        }
        out.hosts.sort();
        out.hosts.dedup();
        out.suffixes.sort();
        out.suffixes.dedup();
        out.nets.sort();
        out.nets.dedup();
        Ok(out)
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty() && self.suffixes.is_empty() && self.nets.is_empty()
    }

    /// Whether the list names the domain `host` (exactly, or below a
    /// suffix pattern).
    pub fn names_host(&self, host: &str) -> bool {
        let h = host.trim_end_matches('.').to_ascii_lowercase();
        self.hosts.binary_search(&h).is_ok()
            || self
                .suffixes
                .iter()
                .any(|s| h.len() > s.len() && h.ends_with(s.as_str()))
    }

    /// Whether an address or block of the list contains `ip`.
    pub fn covers(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.nets.iter().any(|n| n.contains(&ip))
    }
}

/// A DNS name in canonical form, or `None` when `s` is not one (labels of
/// letters, digits and hyphens, none empty, none starting or ending with a
/// hyphen, at most 63 characters each; underscores are accepted, as
/// service names use them).
fn dns_name(s: &str) -> Option<String> {
    let s = s.strip_suffix('.').unwrap_or(s);
    if s.is_empty() || s.len() > MAX_ENTRY_LEN {
        return None;
    }
    let ok = s.split('.').all(|l| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    });
    // All-numeric names are addresses in disguise (`127.1`): URL parsers
    // read them as IPv4, so an entry must say so in address form.
    let numeric = s.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    (ok && !numeric).then(|| s.to_owned())
}

/// An IPv4 address carried inside an IPv6 one (IPv4-mapped, IPv4-compatible,
/// NAT64 well-known prefix, 6to4) as the IPv4 address; others unchanged.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => embedded_v4(&v6).map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn canonical_net(net: IpNet) -> IpNet {
    match net {
        IpNet::V6(n) if n.prefix_len() >= 96 => match n.addr().to_ipv4_mapped() {
            Some(v4) => IpNet::new(IpAddr::V4(v4), n.prefix_len() - 96).unwrap_or(net),
            None => net,
        },
        other => other,
    }
}

fn embedded_v4(ip: &Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let o = ip.octets();
    let tail = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    // IPv4-compatible `::a.b.c.d` (deprecated, RFC 4291 §2.5.5.1); `::`
    // and `::1` are themselves, not IPv4.
    if s[..6] == [0; 6] && !matches!(u32::from(tail), 0 | 1) {
        return Some(tail);
    }
    // NAT64 well-known prefix `64:ff9b::/96` (RFC 6052).
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(tail);
    }
    // 6to4 `2002:aabb:ccdd::/48` (RFC 3056).
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::new(o[2], o[3], o[4], o[5]));
    }
    None
}

/// Whether `ip` is public unicast (see the module documentation for what is
/// not).
pub fn is_public(ip: IpAddr) -> bool {
    match canonical(ip) {
        IpAddr::V4(v4) => v4_is_public(v4),
        IpAddr::V6(v6) => v6_is_public(v6),
    }
}

fn v4_is_public(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(a == 0
        || a == 10
        || a == 127
        || (a == 100 && (64..128).contains(&b))
        || (a == 169 && b == 254)
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 0 && c == 0)
        || (a == 192 && b == 0 && c == 2)
        || (a == 192 && b == 168)
        || (a == 198 && (18..20).contains(&b))
        || (a == 198 && b == 51 && c == 100)
        || (a == 203 && b == 0 && c == 113)
        || a >= 224)
}

fn v6_is_public(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || (s[0] & 0xfe00) == 0xfc00
        || (s[0] & 0xffc0) == 0xfe80
        || (s[0] & 0xffc0) == 0xfec0
        || (s[0] & 0xff00) == 0xff00
        || (s[0] == 0x2001 && s[1] == 0x0db8)
        || (s[0] == 0x2001 && s[1] == 0)
        || (s[0] == 0x0100 && s[1..4] == [0, 0, 0]))
}

/// Whether `ip` is this machine (`127.0.0.0/8`, `::1`, or either inside an
/// IPv6 form).
pub fn is_loopback(ip: IpAddr) -> bool {
    match canonical(ip) {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback(),
    }
}

/// What one request may reach: an allow-list (the tenant's, or the
/// operator's for the server's own requests) and whether the operator
/// allows loopback. Equal rules share an HTTP client (and its pooled
/// connections); different rules never do, so a connection made under one
/// tenant's allow-list is never reused under another's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Rules {
    allow: Arc<AllowList>,
    loopback: bool,
}

impl Rules {
    /// Rules of `allow`, with loopback allowed when `loopback` is true.
    pub fn new(allow: AllowList, loopback: bool) -> Self {
        Rules {
            allow: Arc::new(allow),
            loopback,
        }
    }

    /// The allow-list.
    pub fn allow_list(&self) -> &AllowList {
        &self.allow
    }

    /// Whether a connection to `ip` (reached through a name the list does
    /// not name) is allowed.
    pub fn allows_ip(&self, ip: IpAddr) -> bool {
        is_public(ip) || self.allow.covers(ip) || (self.loopback && is_loopback(ip))
    }

    /// Whether the list names `host` itself (so any address it resolves to
    /// is allowed).
    pub fn names(&self, host: &str) -> bool {
        self.allow.names_host(host)
    }

    /// Whether a URL host may be contacted as written, before any name is
    /// resolved: an IP literal is judged as the address it is; `localhost`
    /// and its subdomains as loopback; other names pass here and are judged
    /// by the addresses they resolve to.
    pub fn allows_host(&self, host: &Host<&str>) -> bool {
        match host {
            Host::Ipv4(ip) => self.allows_ip(IpAddr::V4(*ip)),
            Host::Ipv6(ip) => self.allows_ip(IpAddr::V6(*ip)),
            Host::Domain(d) => !is_localhost_name(d) || self.loopback || self.allow.names_host(d),
        }
    }

    /// Whether credentials may travel to `host` over plain `http://`: only
    /// to a host the allow-list names explicitly (its name, or an IP literal
    /// inside one of its addresses or blocks), or to loopback when the
    /// operator allows loopback (the bytes never leave the machine).
    pub fn plain_credentials_ok(&self, host: &Host<&str>) -> bool {
        match host {
            Host::Domain(d) => self.allow.names_host(d) || (self.loopback && is_localhost_name(d)),
            Host::Ipv4(ip) => self.named_ip(IpAddr::V4(*ip)),
            Host::Ipv6(ip) => self.named_ip(IpAddr::V6(*ip)),
        }
    }

    fn named_ip(&self, ip: IpAddr) -> bool {
        self.allow.covers(ip) || (self.loopback && is_loopback(ip))
    }
}

/// `localhost` and names below it (RFC 6761 §6.3: they resolve to
/// loopback, whatever a resolver says).
fn is_localhost_name(d: &str) -> bool {
    let d = d.trim_end_matches('.').to_ascii_lowercase();
    d == "localhost" || d.ends_with(".localhost")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn only_public_unicast_is_public() {
        for refused in [
            "127.0.0.1",
            "127.255.0.9",
            "10.0.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.254",
            "0.0.0.0",
            "0.1.2.3",
            "255.255.255.255",
            "224.0.0.1",
            "240.0.0.1",
            "192.0.0.8",
            "192.0.2.1",
            "198.18.0.1",
            "::",
            "::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "2001:db8::1",
            "::ffff:127.0.0.1",
            "::ffff:10.1.2.3",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "::10.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::1",
            "2001:0:4136:e378::1",
            "100::1",
        ] {
            assert!(!is_public(ip(refused)), "{refused} must be refused");
        }
        for public in [
            "1.1.1.1",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "169.253.0.1",
            "2606:4700:4700::1111",
            "::ffff:1.1.1.1",
            "64:ff9b::101:101",
        ] {
            assert!(is_public(ip(public)), "{public} is public");
        }
    }

    #[test]
    fn allow_lists_parse_and_match() {
        let a = AllowList::parse([
            "Notes.Internal.Example.",
            "*.corp.example",
            "10.20.0.0/16",
            "127.0.0.1",
            "[fd00::1]",
            "::ffff:192.168.7.0/120",
        ])
        .unwrap();
        assert!(a.names_host("notes.internal.example"));
        assert!(a.names_host("NOTES.internal.example."));
        assert!(!a.names_host("x.notes.internal.example"));
        assert!(a.names_host("mcp.corp.example"));
        assert!(a.names_host("a.b.corp.example"));
        assert!(
            !a.names_host("corp.example"),
            "a suffix is not the name itself"
        );
        assert!(!a.names_host("evilcorp.example"));
        assert!(a.covers(ip("10.20.3.4")));
        assert!(!a.covers(ip("10.21.0.1")));
        assert!(a.covers(ip("127.0.0.1")));
        assert!(a.covers(ip("::ffff:127.0.0.1")), "mapped forms match too");
        assert!(!a.covers(ip("127.0.0.2")));
        assert!(a.covers(ip("fd00::1")));
        assert!(a.covers(ip("192.168.7.9")));
        assert!(!a.covers(ip("192.168.8.9")));
        for bad in [
            "",
            " ",
            "*",
            "*.",
            "a..b",
            "-a.example",
            "a b",
            "http://x",
            "10.0.0.0/33",
            "127.1",
            "x/16",
        ] {
            assert!(AllowList::parse([bad]).is_err(), "{bad:?}");
        }
        let many: Vec<String> = (0..=MAX_ENTRIES).map(|i| format!("h{i}.example")).collect();
        assert_eq!(
            AllowList::parse(many.iter().map(String::as_str)),
            Err(AllowListError::TooMany)
        );
    }

    #[test]
    fn rules_judge_hosts_and_plain_credentials() {
        let strict = Rules::new(AllowList::default(), false);
        let dev = Rules::new(AllowList::default(), true);
        let listed = Rules::new(
            AllowList::parse(["notes.internal.example", "10.0.0.0/8"]).unwrap(),
            false,
        );
        let h = |s: &str| url::Url::parse(s).unwrap().host().unwrap().to_owned();
        for u in [
            "http://127.0.0.1/",
            "http://[::1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://0.0.0.0/",
            "http://2130706433/",
            "http://localhost/",
            "http://a.localhost/",
            "http://169.254.169.254/",
        ] {
            assert!(!strict.allows_host(&h(u).borrow()), "{u}");
        }
        assert!(dev.allows_host(&h("http://127.0.0.1/").borrow()));
        assert!(dev.allows_host(&h("http://localhost/").borrow()));
        assert!(!dev.allows_host(&h("http://10.0.0.1/").borrow()));
        assert!(listed.allows_host(&h("http://10.9.9.9/").borrow()));
        assert!(strict.allows_host(&h("https://example.com/").borrow()));
        // Credentials over plain http: only where named.
        assert!(!strict.plain_credentials_ok(&h("http://example.com/").borrow()));
        assert!(listed.plain_credentials_ok(&h("http://notes.internal.example/").borrow()));
        assert!(listed.plain_credentials_ok(&h("http://10.1.1.1/").borrow()));
        assert!(!listed.plain_credentials_ok(&h("http://other.example/").borrow()));
        assert!(dev.plain_credentials_ok(&h("http://127.0.0.1:9/").borrow()));
        assert!(!strict.plain_credentials_ok(&h("http://127.0.0.1:9/").borrow()));
    }

    trait Borrowed {
        fn borrow(&self) -> Host<&str>;
    }
    impl Borrowed for Host<String> {
        fn borrow(&self) -> Host<&str> {
            match self {
                Host::Domain(d) => Host::Domain(d.as_str()),
                Host::Ipv4(i) => Host::Ipv4(*i),
                Host::Ipv6(i) => Host::Ipv6(*i),
            }
        }
    }
}
