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
//! `inet_server_port()`), looks through this process's open file
//! descriptors for the one TCP socket whose local address is that client
//! endpoint (the peer address decides between sockets sharing a local port),
//! and sets `TCP_NODELAY` on exactly that socket. It costs one round trip
//! and one scan of `/proc/self/fd` per connection, not per query, and works
//! the same under TLS (the option is on the TCP socket beneath it).
//!
//! What it never does: touch a socket it has not identified. A descriptor is
//! duplicated first and every check and the `setsockopt` are made on the
//! duplicate, so the check and the change apply to the same socket even if
//! the number is closed and reused meanwhile. When the server's view of the
//! client differs from ours (a NAT or a connection pooler in between), or
//! nothing or more than one socket matches, the connection is left as it is
//! and the outcome is logged at debug: the connection still works, only
//! slower for large statements. Unix-socket connections have no endpoints
//! and are skipped. Outside Linux this is a no-op.
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
/// the one whose peer is the server. Descriptors with the same inode are
/// one socket (duplicates: another thread's scan holds a copy of every
/// socket for a moment while it runs), so they never make a match
/// ambiguous. Returns the index of one match.
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
    use std::io;
    use std::net::SocketAddr;
    use std::os::fd::{BorrowedFd, OwnedFd, RawFd};

    use socket2::{SockRef, Type};

    use super::{Endpoints, Outcome, pick};

    /// A duplicated descriptor, its local and peer addresses, its inode.
    type Candidate = (OwnedFd, SocketAddr, Option<SocketAddr>, u64);

    /// The inode of a `/proc/self/fd` link that names a socket
    /// (`socket:[12345]`); `None` for anything else.
    fn socket_inode(link: &[u8]) -> Option<u64> {
        let digits = link.strip_prefix(b"socket:[")?.strip_suffix(b"]")?;
        std::str::from_utf8(digits).ok()?.parse().ok()
    }

    /// Duplicates every socket descriptor of this process that is a
    /// connected TCP (stream, IPv4 or IPv6) socket, with its local and peer
    /// addresses and its socket inode.
    fn tcp_sockets() -> io::Result<Vec<Candidate>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir("/proc/self/fd")? {
            let Ok(entry) = entry else { continue };
            let Some(fd) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<RawFd>().ok())
            else {
                continue;
            };
            // Only sockets ("socket:[inode]"); files, pipes, epoll... are
            // never duplicated.
            let Some(inode) = std::fs::read_link(entry.path())
                .ok()
                .and_then(|l| socket_inode(l.as_os_str().as_encoded_bytes()))
            else {
                continue;
            };
            // SAFETY: `fd` was listed in /proc/self/fd, so it was open in
            // this process a moment ago; it is borrowed for exactly one
            // fcntl(F_DUPFD_CLOEXEC). If another thread closed it in
            // between, the dup fails (EBADF) and the descriptor is skipped;
            // if the number was reused, the duplicate refers to whatever
            // now holds it, and every check below is made on that
            // duplicate, so nothing acts on a socket that was not checked.
            // No memory is involved either way.
            #[allow(unsafe_code)]
            let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
            let Ok(owned) = borrowed.try_clone_to_owned() else {
                continue;
            };
            let s = SockRef::from(&owned);
            if !s.r#type().is_ok_and(|t| t == Type::STREAM) {
                continue;
            }
            let Some(local) = s.local_addr().ok().and_then(|a| a.as_socket()) else {
                continue; // not IPv4/IPv6 (a Unix socket)
            };
            let peer = s.peer_addr().ok().and_then(|a| a.as_socket());
            if peer.is_none() {
                continue; // a listener, or not connected
            }
            out.push((owned, local, peer, inode));
        }
        Ok(out)
    }

    fn find(ep: &Endpoints) -> io::Result<Result<OwnedFd, Outcome>> {
        let mut socks = tcp_sockets()?;
        let addrs: Vec<_> = socks.iter().map(|(_, l, p, i)| (*l, *p, *i)).collect();
        Ok(pick(ep, &addrs).map(|i| socks.swap_remove(i).0))
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

        use socket2::{Domain, Protocol, Socket};

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

        /// Another thread's scan holds a duplicate of every socket while
        /// it runs (as concurrent pool connections do): a duplicate is the
        /// same socket, never a second candidate.
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
