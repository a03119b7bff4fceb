//! `TCP_NODELAY` on the pool's TCP connections to PostgreSQL.
//!
//! sqlx 0.9.0 opens its TCP sockets without `TCP_NODELAY` (sqlx issue 4335,
//! fixed upstream after the release) and has no hook to reach the socket it
//! opened: `PgConnectOptions` takes a host or a Unix socket path, never a
//! stream, and a `PgConnection` exposes no file descriptor. With Nagle's
//! algorithm on, the tail of a statement larger than what the first write
//! put on the wire waits until the server acknowledges the head, and the
//! server delays that acknowledgement (~40 ms on Linux) because it is
//! waiting for the rest of the message: a publish of a 58 KiB signature
//! stalled on every statement that carried the document.
//!
//! So each new pooled connection (`PoolOptions::after_connect`) asks the
//! server which TCP endpoints it sees for this very connection
//! (`inet_client_addr()`, `inet_client_port()`, `inet_server_addr()`,
//! `inet_server_port()`), finds the one TCP socket of this process whose
//! local address is that client endpoint (the peer address decides between
//! sockets sharing a local port), and sets `TCP_NODELAY` on exactly that
//! socket. It costs one round trip and one look at `/proc` per connection,
//! not per query, and works the same under TLS (the option is on the TCP
//! socket beneath it).
//!
//! The match is made before any descriptor is touched: `/proc/self/fd`'s
//! links name this process's sockets by inode (`socket:[12345]`, read with
//! `readlink` only), and `/proc/self/net/tcp` and `tcp6` give each
//! socket's local and peer address by inode. Only the descriptor of the one
//! socket that matches is then duplicated, and the duplicate is checked to
//! be that socket (its own `/proc/self/fd` link names the same inode)
//! before anything is read from or set on it. So the scan holds no extra
//! descriptor (one, for a moment, at the end), and a descriptor number
//! closed or reused by another thread meanwhile is never acted on: its
//! duplication fails, or the duplicate names another inode and is closed
//! again untouched.
//!
//! What it never does: touch a socket it has not identified. When the
//! server's view of the client differs from ours (a NAT or a connection
//! pooler in between), or nothing or more than one socket matches, the
//! connection is left as it is and the outcome is logged at debug: the
//! connection still works, only slower for large statements. Unix-socket
//! connections have no endpoints and are skipped. Outside Linux this is a
//! no-op.
//!
//! Alternatives rejected (ARCHITECTURE.md, "Storage"): sqlx 0.9 exposes no
//! socket hook; pinning sqlx 0.8 gives up the release we moved to;
//! `pidfd_getfd` on our own process would avoid `unsafe`, but container
//! runtimes' default seccomp profiles refuse it without `CAP_SYS_PTRACE`;
//! a socket interposer or a local proxy would touch far more than the
//! pool's sockets.

use std::net::{IpAddr, SocketAddr};

use sqlx::PgConnection;

/// The TCP endpoints of one connection as the server sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoints {
    /// The client's address and port (ours, unless translated on the way).
    pub client: SocketAddr,
    /// The server's address and port.
    pub server: SocketAddr,
}

/// What [`enable`] did to a connection's socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// `TCP_NODELAY` was off and is now on.
    Set,
    /// It was already on (a later sqlx that sets it itself, or a second call).
    AlreadySet,
    /// The connection is not TCP (a Unix socket): nothing to do.
    NotTcp,
    /// No socket of this process has the endpoints the server reported (a
    /// NAT or pooler in between): left as it is.
    NotFound,
    /// More than one socket matched: left as it is.
    Ambiguous,
    /// Not supported on this platform: left as it is.
    Unsupported,
}

/// The connection's TCP endpoints as the server reports them, or `None`
/// over a Unix socket.
pub async fn endpoints(conn: &mut PgConnection) -> Result<Option<Endpoints>, sqlx::Error> {
    let (client_addr, client_port, server_addr, server_port): (
        Option<String>,
        Option<i32>,
        Option<String>,
        Option<i32>,
    ) = sqlx::query_as(
        "SELECT host(inet_client_addr()), inet_client_port(), \
                host(inet_server_addr()), inet_server_port()",
    )
    .fetch_one(conn)
    .await?;
    let addr = |ip: Option<String>, port: Option<i32>| -> Option<SocketAddr> {
        let ip: IpAddr = ip?.parse().ok()?;
        let port = u16::try_from(port?).ok()?;
        Some(SocketAddr::new(ip, port))
    };
    Ok(
        match (
            addr(client_addr, client_port),
            addr(server_addr, server_port),
        ) {
            (Some(client), Some(server)) => Some(Endpoints { client, server }),
            _ => None,
        },
    )
}

/// Sets `TCP_NODELAY` on the socket of `conn` (see the module docs). Never
/// fails the connection: anything unexpected is an [`Outcome`] or a logged
/// error.
pub async fn enable(conn: &mut PgConnection) -> Outcome {
    let ep = match endpoints(conn).await {
        Ok(Some(ep)) => ep,
        Ok(None) => return Outcome::NotTcp,
        Err(e) => {
            tracing::debug!(error = %e, "cannot ask PostgreSQL for this connection's endpoints; TCP_NODELAY left as is");
            return Outcome::NotFound;
        }
    };
    let outcome = match sys::enable(&ep) {
        Ok(o) => o,
        Err(e) => {
            tracing::debug!(error = %e, "cannot inspect this process's sockets; TCP_NODELAY left as is");
            Outcome::NotFound
        }
    };
    match outcome {
        Outcome::Set | Outcome::AlreadySet => {
            tracing::trace!(client = %ep.client, server = %ep.server, ?outcome, "TCP_NODELAY on the PostgreSQL connection");
        }
        _ => tracing::debug!(
            client = %ep.client,
            server = %ep.server,
            ?outcome,
            "no socket of this process matches the PostgreSQL connection; TCP_NODELAY left as is"
        ),
    }
    outcome
}

/// Whether `TCP_NODELAY` is on for the socket of `conn`: `None` when it is
/// not TCP or its socket cannot be identified (see [`enable`]).
pub async fn is_enabled(conn: &mut PgConnection) -> Result<Option<bool>, sqlx::Error> {
    let Some(ep) = endpoints(conn).await? else {
        return Ok(None);
    };
    sys::get(&ep).map_err(sqlx::Error::Io)
}

/// Canonical form for comparing addresses (an IPv4-mapped IPv6 address
/// equals its IPv4 address).
fn canonical(a: SocketAddr) -> (IpAddr, u16) {
    (a.ip().to_canonical(), a.port())
}

/// The socket whose endpoints the server reported, among candidates given
/// as (local, peer, socket inode): the ones whose local address is the
/// client; if several share it (one local port may serve several peers),
/// the one whose peer is the server. Entries with the same inode are one
/// socket (a socket listed twice), so they never make a match ambiguous.
/// Returns the index of one match.
fn pick(
    ep: &Endpoints,
    sockets: &[(SocketAddr, Option<SocketAddr>, u64)],
) -> Result<usize, Outcome> {
    let one_socket = |c: &[usize]| c.iter().all(|&i| sockets[i].2 == sockets[c[0]].2);
    let client = canonical(ep.client);
    let local: Vec<usize> = (0..sockets.len())
        .filter(|&i| canonical(sockets[i].0) == client)
        .collect();
    if local.is_empty() {
        return Err(Outcome::NotFound);
    }
    if one_socket(&local) {
        return Ok(local[0]);
    }
    let server = canonical(ep.server);
    let both: Vec<usize> = local
        .into_iter()
        .filter(|&i| sockets[i].1.map(canonical) == Some(server))
        .collect();
    if both.is_empty() {
        Err(Outcome::NotFound)
    } else if one_socket(&both) {
        Ok(both[0])
    } else {
        Err(Outcome::Ambiguous)
    }
}

#[cfg(target_os = "linux")]
mod sys {
    use std::collections::HashMap;
    use std::io;
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

    use socket2::SockRef;

    use super::{Endpoints, Outcome, pick};

    /// The `st` column of a listening socket in `/proc/net/tcp`.
    const LISTEN: &str = "0A";

    /// The inode of a `/proc/self/fd` link that names a socket
    /// (`socket:[12345]`); `None` for anything else.
    fn socket_inode(link: &[u8]) -> Option<u64> {
        let digits = link.strip_prefix(b"socket:[")?.strip_suffix(b"]")?;
        std::str::from_utf8(digits).ok()?.parse().ok()
    }

    /// The socket inode a descriptor number names now, from its
    /// `/proc/self/fd` link (nothing is opened or duplicated).
    fn inode_of(fd: RawFd) -> Option<u64> {
        let link = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
        socket_inode(link.as_os_str().as_encoded_bytes())
    }

    /// This process's socket descriptors by socket inode, from the links
    /// of `/proc/self/fd` alone.
    fn own_sockets() -> io::Result<HashMap<u64, Vec<RawFd>>> {
        let mut out: HashMap<u64, Vec<RawFd>> = HashMap::new();
        for entry in std::fs::read_dir("/proc/self/fd")? {
            let Ok(entry) = entry else { continue };
            let Some(fd) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<RawFd>().ok())
            else {
                continue;
            };
            // Files, pipes, epoll... are not sockets and are skipped.
            if let Some(inode) = inode_of(fd) {
                out.entry(inode).or_default().push(fd);
            }
        }
        Ok(out)
    }

    /// An address of `/proc/net/tcp{,6}`: the IP as 8 (IPv4) or 32 (IPv6)
    /// hex digits, 32-bit words in the machine's byte order, then `:` and
    /// the port as 4 hex digits.
    pub(super) fn proc_addr(text: &str) -> Option<SocketAddr> {
        let (ip, port) = text.split_once(':')?;
        let port = u16::from_str_radix(port, 16).ok()?;
        let word = |i: usize| -> Option<[u8; 4]> {
            let hex = ip.get(i * 8..i * 8 + 8)?;
            Some(u32::from_str_radix(hex, 16).ok()?.to_ne_bytes())
        };
        let ip = match ip.len() {
            8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
            32 => {
                let mut bytes = [0u8; 16];
                for i in 0..4 {
                    bytes[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
                }
                IpAddr::V6(Ipv6Addr::from(bytes))
            }
            _ => return None,
        };
        Some(SocketAddr::new(ip, port))
    }

    /// One row of `/proc/net/tcp{,6}` as (local, peer, inode), when it is a
    /// connected socket: not listening, with a peer, owned by a socket
    /// (inode not 0, which a closing connection has).
    pub(super) fn proc_row(line: &str) -> Option<(SocketAddr, SocketAddr, u64)> {
        let mut cols = line.split_whitespace();
        let _slot = cols.next()?;
        let local = proc_addr(cols.next()?)?;
        let peer = proc_addr(cols.next()?)?;
        let state = cols.next()?;
        // tx:rx queues, timer, retransmits, uid, timeout, then the inode.
        let inode: u64 = cols.nth(5)?.parse().ok()?;
        if state == LISTEN || inode == 0 || peer.port() == 0 {
            return None;
        }
        Some((local, peer, inode))
    }

    /// The connected TCP sockets of this network namespace that belong to
    /// this process (their inode is in `own`), as `pick` takes them.
    fn candidates(
        own: &HashMap<u64, Vec<RawFd>>,
    ) -> io::Result<Vec<(SocketAddr, Option<SocketAddr>, u64)>> {
        let mut out = Vec::new();
        for (table, required) in [("/proc/self/net/tcp", true), ("/proc/self/net/tcp6", false)] {
            let text = match std::fs::read_to_string(table) {
                Ok(t) => t,
                // No tcp6 table where IPv6 is off.
                Err(e) if !required && e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            for line in text.lines().skip(1) {
                if let Some((local, peer, inode)) = proc_row(line)
                    && own.contains_key(&inode)
                {
                    out.push((local, Some(peer), inode));
                }
            }
        }
        Ok(out)
    }

    /// A new descriptor for descriptor number `fd`, owned by the caller:
    /// `fcntl(F_DUPFD_CLOEXEC)` on the number, never a borrow of it.
    fn duplicate(fd: RawFd) -> Option<OwnedFd> {
        // SAFETY: `fcntl(F_DUPFD_CLOEXEC)` takes a plain integer and touches
        // no memory of ours. `fd` is not borrowed or assumed open: if
        // another thread closed it since `/proc/self/fd` listed it, the call
        // fails (EBADF) and `None` is returned; if the number was reused,
        // the new descriptor refers to whatever holds it now, and the
        // caller checks the duplicate's inode before using it. The returned
        // number is a descriptor this call just created, known to nobody
        // else, so `OwnedFd` is its one owner and closes it once.
        #[allow(unsafe_code)]
        unsafe {
            let new = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0);
            (new >= 0).then(|| OwnedFd::from_raw_fd(new))
        }
    }

    /// A descriptor of socket `inode`: the first of `fds` whose duplicate
    /// is that socket. A duplicate of anything else is closed unused.
    pub(super) fn dup_socket(fds: &[RawFd], inode: u64) -> Option<OwnedFd> {
        fds.iter().find_map(|&fd| {
            let dup = duplicate(fd)?;
            (inode_of(dup.as_raw_fd()) == Some(inode)).then_some(dup)
        })
    }

    fn find(ep: &Endpoints) -> io::Result<Result<OwnedFd, Outcome>> {
        let own = own_sockets()?;
        let sockets = candidates(&own)?;
        let inode = match pick(ep, &sockets) {
            Ok(i) => sockets[i].2,
            Err(outcome) => return Ok(Err(outcome)),
        };
        let fds = own.get(&inode).map_or(&[][..], Vec::as_slice);
        Ok(dup_socket(fds, inode).ok_or(Outcome::NotFound))
    }

    pub(super) fn enable(ep: &Endpoints) -> io::Result<Outcome> {
        let fd = match find(ep)? {
            Ok(fd) => fd,
            Err(outcome) => return Ok(outcome),
        };
        let s = SockRef::from(&fd);
        if s.tcp_nodelay()? {
            return Ok(Outcome::AlreadySet);
        }
        s.set_tcp_nodelay(true)?;
        Ok(Outcome::Set)
    }

    pub(super) fn get(ep: &Endpoints) -> io::Result<Option<bool>> {
        match find(ep)? {
            Ok(fd) => SockRef::from(&fd).tcp_nodelay().map(Some),
            Err(_) => Ok(None),
        }
    }

    #[cfg(test)]
    mod tests {
        use std::net::{TcpListener, TcpStream};

        use socket2::{Domain, Protocol, Socket, Type};

        use super::*;

        fn ep(s: &TcpStream) -> Endpoints {
            Endpoints {
                client: s.local_addr().unwrap(),
                server: s.peer_addr().unwrap(),
            }
        }

        #[test]
        fn sets_nodelay_on_exactly_the_identified_socket() {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let a = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let b = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let (a_srv, _) = listener.accept().unwrap();
            let (b_srv, _) = listener.accept().unwrap();
            for s in [&a, &b, &a_srv, &b_srv] {
                s.set_nodelay(false).unwrap();
            }
            assert_eq!(get(&ep(&a)).unwrap(), Some(false));
            assert_eq!(enable(&ep(&a)).unwrap(), Outcome::Set);
            assert!(a.nodelay().unwrap(), "the identified socket");
            assert!(
                !b.nodelay().unwrap(),
                "another connection to the same server"
            );
            assert!(
                !a_srv.nodelay().unwrap(),
                "the accepted end of the same connection"
            );
            assert!(!b_srv.nodelay().unwrap());
            // Idempotent: a second call finds it already on and changes nothing.
            assert_eq!(enable(&ep(&a)).unwrap(), Outcome::AlreadySet);
            assert_eq!(get(&ep(&a)).unwrap(), Some(true));
            assert!(!b.nodelay().unwrap());
        }

        /// A socket with two descriptors (a duplicate the process made) is
        /// one socket, never two candidates.
        #[test]
        fn a_duplicate_descriptor_is_the_same_socket() {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let a = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let _srv = listener.accept().unwrap();
            a.set_nodelay(false).unwrap();
            let dup = a.try_clone().unwrap();
            assert_eq!(enable(&ep(&a)).unwrap(), Outcome::Set);
            assert!(a.nodelay().unwrap() && dup.nodelay().unwrap());
            assert_eq!(socket_inode(b"socket:[4242]"), Some(4242));
            assert_eq!(socket_inode(b"pipe:[4242]"), None);
            assert_eq!(socket_inode(b"socket:[x]"), None);
        }

        #[test]
        fn endpoints_seen_through_a_translation_match_nothing() {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let a = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let _srv = listener.accept().unwrap();
            a.set_nodelay(false).unwrap();
            // What a server behind a NAT or pooler would report: another
            // client address than any of ours.
            let mut seen = ep(&a);
            seen.client = "192.0.2.7:40000".parse().unwrap();
            assert_eq!(enable(&seen).unwrap(), Outcome::NotFound);
            assert_eq!(get(&seen).unwrap(), None);
            assert!(!a.nodelay().unwrap());
        }

        /// Two sockets bound to the same local port, connected to two
        /// servers: the peer address tells them apart.
        #[test]
        fn a_shared_local_port_is_told_apart_by_the_peer() {
            let l1 = TcpListener::bind("127.0.0.1:0").unwrap();
            let l2 = TcpListener::bind("127.0.0.1:0").unwrap();
            let bound = |local: SocketAddr| {
                let s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).unwrap();
                s.set_reuse_address(true).unwrap();
                s.bind(&local.into()).unwrap();
                s
            };
            let first = bound("127.0.0.1:0".parse().unwrap());
            let local = first.local_addr().unwrap().as_socket().unwrap();
            let second = bound(local);
            first.connect(&l1.local_addr().unwrap().into()).unwrap();
            second.connect(&l2.local_addr().unwrap().into()).unwrap();
            let _a = l1.accept().unwrap();
            let _b = l2.accept().unwrap();
            first.set_tcp_nodelay(false).unwrap();
            second.set_tcp_nodelay(false).unwrap();
            let to_second = Endpoints {
                client: local,
                server: l2.local_addr().unwrap(),
            };
            assert_eq!(enable(&to_second).unwrap(), Outcome::Set);
            assert!(second.tcp_nodelay().unwrap());
            assert!(!first.tcp_nodelay().unwrap());
            // A server neither socket talks to: both share the local port,
            // neither matches the peer, so nothing is touched.
            let elsewhere = Endpoints {
                client: local,
                server: "127.0.0.1:9".parse().unwrap(),
            };
            assert_eq!(enable(&elsewhere).unwrap(), Outcome::NotFound);
            assert!(!first.tcp_nodelay().unwrap());
        }

        /// `/proc/net/tcp` rows, built the way the kernel writes them (each
        /// 32-bit word of the address in the machine's byte order).
        #[test]
        fn proc_rows_read_as_the_kernel_writes_them() {
            let v4 = |ip: [u8; 4]| format!("{:08X}", u32::from_ne_bytes(ip));
            let row = format!(
                "   3: {}:D431 {}:1538 01 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 20 4 30 10 -1",
                v4([10, 0, 0, 5]),
                v4([10, 0, 0, 9])
            );
            assert_eq!(
                proc_row(&row),
                Some((
                    "10.0.0.5:54321".parse().unwrap(),
                    "10.0.0.9:5432".parse().unwrap(),
                    4242
                ))
            );
            let v6: String = [0x2001_u16, 0xdb8, 0, 0, 0, 0, 0, 7]
                .chunks(2)
                .map(|w| {
                    let b = [w[0].to_be_bytes(), w[1].to_be_bytes()].concat();
                    format!("{:08X}", u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
                })
                .collect();
            assert_eq!(
                proc_addr(&format!("{v6}:0050")),
                Some("[2001:db8::7]:80".parse().unwrap())
            );
            // Not candidates: a listener, a connection with no socket left
            // (inode 0), no peer; and lines that are not rows.
            let listening = row.replace(" 01 ", " 0A ");
            let orphan = row.replace(" 4242 ", " 0 ");
            let unconnected = row.replace(":1538 ", ":0000 ");
            for line in [
                listening.as_str(),
                &orphan,
                &unconnected,
                "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode",
                "",
                "   0: 0100007F:zz 0100007F:1538 01",
            ] {
                assert_eq!(proc_row(line), None, "{line}");
            }
            assert_eq!(proc_addr("0100007F"), None);
            assert_eq!(proc_addr("01007F:0050"), None);
        }

        /// A descriptor number that no longer names the matched socket
        /// (closed, or reused by another) is never acted on.
        #[test]
        fn a_number_naming_another_socket_is_not_used() {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let a = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let b = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let _srv = (listener.accept().unwrap(), listener.accept().unwrap());
            let a_inode = inode_of(a.as_raw_fd()).expect("a socket");
            let b_inode = inode_of(b.as_raw_fd()).expect("a socket");
            assert_ne!(a_inode, b_inode);
            let dup = dup_socket(&[a.as_raw_fd()], a_inode).expect("a's own number");
            assert_eq!(inode_of(dup.as_raw_fd()), Some(a_inode));
            assert_eq!(dup_socket(&[b.as_raw_fd()], a_inode).map(|_| ()), None);
            // A number closed meanwhile (or already reused by another
            // test's socket): never taken for a's.
            let closed = {
                let gone = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
                gone.as_raw_fd()
            };
            assert_eq!(dup_socket(&[closed], a_inode).map(|_| ()), None);
            // The first number that is the socket wins, the others are
            // closed again.
            let found = dup_socket(&[b.as_raw_fd(), a.as_raw_fd()], a_inode).unwrap();
            assert_eq!(inode_of(found.as_raw_fd()), Some(a_inode));
        }

        #[test]
        fn an_ipv6_connection_is_found_too() {
            let Ok(listener) = TcpListener::bind("[::1]:0") else {
                eprintln!("notice: no IPv6 loopback here; the IPv6 case is skipped");
                return;
            };
            let a = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let _srv = listener.accept().unwrap();
            a.set_nodelay(false).unwrap();
            assert_eq!(get(&ep(&a)).unwrap(), Some(false));
            assert_eq!(enable(&ep(&a)).unwrap(), Outcome::Set);
            assert!(a.nodelay().unwrap());
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod sys {
    use std::io;

    use super::{Endpoints, Outcome};

    pub(super) fn enable(_: &Endpoints) -> io::Result<Outcome> {
        Ok(Outcome::Unsupported)
    }

    pub(super) fn get(_: &Endpoints) -> io::Result<Option<bool>> {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn pick_prefers_the_local_address_then_the_peer() {
        let ep = Endpoints {
            client: a("10.0.0.5:51000"),
            server: a("10.0.0.9:5432"),
        };
        let other = (a("10.0.0.5:51001"), Some(a("10.0.0.9:5432")), 1);
        let mine = (a("10.0.0.5:51000"), Some(a("10.0.0.9:5432")), 2);
        let same_port_elsewhere = (a("10.0.0.5:51000"), Some(a("10.0.0.8:443")), 3);
        assert_eq!(pick(&ep, &[other, mine]), Ok(1));
        assert_eq!(pick(&ep, &[same_port_elsewhere, other, mine]), Ok(2));
        assert_eq!(pick(&ep, &[other]), Err(Outcome::NotFound));
        // Two sockets with the same endpoints cannot be told apart...
        let twin = (mine.0, mine.1, 4);
        assert_eq!(pick(&ep, &[mine, twin]), Err(Outcome::Ambiguous));
        // ...but two descriptors of one socket are that socket.
        assert_eq!(pick(&ep, &[other, mine, mine]), Ok(1));
        assert_eq!(
            pick(&ep, &[same_port_elsewhere, mine, mine]),
            Ok(1),
            "the peer decides, duplicates aside"
        );
        // A DNAT'd service address: the local side matches alone.
        assert_eq!(
            pick(
                &ep,
                &[(a("10.0.0.5:51000"), Some(a("172.20.0.1:5432")), 5), other]
            ),
            Ok(0)
        );
        // IPv4-mapped IPv6 on one side.
        let mapped = (
            a("[::ffff:10.0.0.5]:51000"),
            Some(a("[::ffff:10.0.0.9]:5432")),
            6,
        );
        assert_eq!(pick(&ep, &[other, mapped]), Ok(1));
    }
}
