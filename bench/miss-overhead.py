#!/usr/bin/env python3
"""Resolve-miss overhead: Signet's resolve of a call it has not seen, against
calling the same upstream's tools/resolve directly, one keep-alive connection
each, N distinct calls (every one a miss), mean and p50/p99 in milliseconds.

    bench/miss-overhead.py SIGNET_BASE TOKEN SESSION_PATH UPSTREAM_MCP_URL [N]

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


def direct(url, n):
    c, path = conn_for(url)
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "miss-overhead", "version": "0"}}}
    c.request("POST", path, json.dumps(init), headers)
    r = c.getresponse()
    body_of(r)
    sid = r.getheader("mcp-session-id")
    if sid:
        headers["mcp-session-id"] = sid
    headers["mcp-protocol-version"] = "2025-11-25"
    c.request("POST", path, json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}), headers)
    c.getresponse().read()
    times = []
    for i in range(n):
        req = {"jsonrpc": "2.0", "id": i + 1, "method": "tools/resolve", "params": {
            "name": "manage_files", "arguments": {"path": f"/direct/{i}", "action": "read"}}}
        t = time.perf_counter()
        c.request("POST", path, json.dumps(req), headers)
        b = body_of(c.getresponse())
        times.append(time.perf_counter() - t)
        assert b and "result" in b, b
    return times


def signet(base, token, session, n, prefix="signet"):
    c, _ = conn_for(base)
    headers = {"content-type": "application/json", "authorization": f"Bearer {token}"}
    times = []
    for i in range(n):
        req = {"name": "manage_files", "arguments": {"path": f"/{prefix}/{i}", "action": "read"}}
        t = time.perf_counter()
        c.request("POST", session + "/resolve", json.dumps(req), headers)
        r = c.getresponse()
        b = json.loads(r.read())
        times.append(time.perf_counter() - t)
        assert r.status == 200 and b["source"] == "upstream", b
    return times


def summary(times):
    ms = sorted(t * 1000 for t in times)
    return statistics.mean(ms), ms[len(ms) // 2], ms[int(len(ms) * 0.99) - 1]


def main():
    base, token, session, upstream = sys.argv[1:5]
    n = int(sys.argv[5]) if len(sys.argv) > 5 else 2000
    signet(base, token, session, 50, "warm")  # the session's upstream connection
    d = summary(direct(upstream, n))
    s = summary(signet(base, token, session, n))
    print(f"direct tools/resolve : mean {d[0]:.3f} ms  p50 {d[1]:.3f}  p99 {d[2]:.3f}")
    print(f"Signet resolve (miss): mean {s[0]:.3f} ms  p50 {s[1]:.3f}  p99 {s[2]:.3f}")
    print(f"miss overhead        : mean {s[0] - d[0]:.3f} ms (target <= 0.3 ms)")


if __name__ == "__main__":
    main()
