#!/usr/bin/env python3
"""Resolve-miss overhead: Pinfold's resolve of a call it has not seen, against
calling the same upstream's tools/resolve directly, one keep-alive connection
each, N distinct calls (every one a miss), mean and p50/p99 in milliseconds,
interleaved in rounds; the hit line (a cached call, no upstream) shows how
much of the overhead is the extra HTTP hop to Pinfold itself.

    bench/miss-overhead.py PINFOLD_BASE TOKEN SESSION_PATH UPSTREAM_MCP_URL [N [BARE_BASE]]

With BARE_BASE (bench/bare started with the upstream URL), a fourth column:
the same call through the bare forwarder's POST /forward, the floor any
proxy pays for the second hop; Pinfold's figure is also given over it.

SESSION_PATH is /v1/tenants/T/sessions/ID of a session on that upstream (see
bench/miss-overhead.sh, which sets everything up). Python's own cost is in
both columns and cancels in the difference.
"""
import http.client
import json
import statistics
import sys
import time
import urllib.parse


def conn_for(url):
    u = urllib.parse.urlsplit(url)
    return http.client.HTTPConnection(u.hostname, u.port), u.path


def body_of(resp):
    raw = resp.read()
    if resp.getheader("content-type", "").startswith("text/event-stream"):
        for line in raw.decode().splitlines():
            if line.startswith("data:") and line[5:].strip():
                return json.loads(line[5:])
        return None
    return json.loads(raw) if raw else None


class Direct:
    """tools/resolve straight to the upstream on one keep-alive connection."""

    def __init__(self, url):
        self.c, self.path = conn_for(url)
        self.headers = {"content-type": "application/json",
                        "accept": "application/json, text/event-stream"}
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "miss-overhead", "version": "0"}}}
        self.c.request("POST", self.path, json.dumps(init), self.headers)
        r = self.c.getresponse()
        body_of(r)
        sid = r.getheader("mcp-session-id")
        if sid:
            self.headers["mcp-session-id"] = sid
        self.headers["mcp-protocol-version"] = "2025-11-25"
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        self.c.request("POST", self.path, json.dumps(note), self.headers)
        self.c.getresponse().read()
        self.i = 0

    def run(self, n):
        times = []
        for _ in range(n):
            self.i += 1
            req = {"jsonrpc": "2.0", "id": self.i, "method": "tools/resolve", "params": {
                "name": "manage_files", "arguments": {"path": f"/direct/{self.i}", "action": "read"}}}
            t = time.perf_counter()
            self.c.request("POST", self.path, json.dumps(req), self.headers)
            b = body_of(self.c.getresponse())
            times.append(time.perf_counter() - t)
            assert b and "result" in b, b
        return times


class Pinfold:
    """Pinfold's resolve on one keep-alive connection: misses (arguments not
    seen before) or hits (the first call's arguments again)."""

    def __init__(self, base, token, session):
        self.c, _ = conn_for(base)
        self.session = session
        self.headers = {"content-type": "application/json", "authorization": f"Bearer {token}"}
        self.i = 0

    def call(self, path, source):
        req = {"name": "manage_files", "arguments": {"path": path, "action": "read"}}
        t = time.perf_counter()
        self.c.request("POST", self.session + "/resolve", json.dumps(req), self.headers)
        r = self.c.getresponse()
        b = json.loads(r.read())
        took = time.perf_counter() - t
        assert r.status == 200 and b["source"] == source, b
        return took

    def misses(self, n):
        out = []
        for _ in range(n):
            self.i += 1
            out.append(self.call(f"/pinfold/{self.i}", "upstream"))
        return out

    def hits(self, n):
        return [self.call("/pinfold/1", "cache") for _ in range(n)]


class Forward:
    """The bare forwarder's POST /forward (a miss through a proxy that
    does nothing but forward)."""

    def __init__(self, base):
        self.c, _ = conn_for(base)
        self.i = 0

    def run(self, n):
        times = []
        for _ in range(n):
            self.i += 1
            req = {"name": "manage_files", "arguments": {"path": f"/bare/{self.i}", "action": "read"}}
            t = time.perf_counter()
            self.c.request("POST", "/forward", json.dumps(req), {"content-type": "application/json"})
            r = self.c.getresponse()
            b = json.loads(r.read())
            times.append(time.perf_counter() - t)
            assert r.status == 200 and "tool" in b, b
        return times


def summary(times):
    ms = sorted(t * 1000 for t in times)
    return statistics.mean(ms), ms[len(ms) // 2], ms[int(len(ms) * 0.99) - 1]


def main():
    base, token, session, upstream = sys.argv[1:5]
    n = int(sys.argv[5]) if len(sys.argv) > 5 else 2000
    d, s = Direct(upstream), Pinfold(base, token, session)
    f = Forward(sys.argv[6]) if len(sys.argv) > 6 else None
    s.misses(50)  # the session's upstream connection; /pinfold/1 is cached
    d.run(50)
    if f:
        f.run(50)
    # Interleaved in rounds of 100, so that drift in the machine's load
    # lands on both columns alike.
    dt, st, ht, ft = [], [], [], []
    for _ in range(max(1, n // 100)):
        dt += d.run(100)
        st += s.misses(100)
        ht += s.hits(100)
        if f:
            ft += f.run(100)
    d, s, h = summary(dt), summary(st), summary(ht)
    print(f"direct tools/resolve : mean {d[0]:.3f} ms  p50 {d[1]:.3f}  p99 {d[2]:.3f}")
    print(f"Pinfold resolve (miss): mean {s[0]:.3f} ms  p50 {s[1]:.3f}  p99 {s[2]:.3f}")
    print(f"Pinfold resolve (hit) : mean {h[0]:.3f} ms  p50 {h[1]:.3f}  p99 {h[2]:.3f}")
    if ft:
        b = summary(ft)
        print(f"bare forward (miss)  : mean {b[0]:.3f} ms  p50 {b[1]:.3f}  p99 {b[2]:.3f}")
        print(f"bare forward overhead: mean {b[0] - d[0]:.3f} ms")
        print(f"Pinfold over bare     : mean {s[0] - b[0]:.3f} ms")
    print(f"miss overhead        : mean {s[0] - d[0]:.3f} ms (target <= 0.3 ms)")


if __name__ == "__main__":
    main()
