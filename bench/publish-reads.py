#!/usr/bin/env python3
"""Publishes COUNT distinct versions (1.0.1 .. 1.0.COUNT) of one server for
the read scenario of bench/load.sh, over one keep-alive connection.

    publish-reads.py BASE_URL TOKEN COUNT [TEMPLATE]

TEMPLATE is a server card (default examples/files-1.1.0.json, ~2.6 KiB);
its name becomes io.github.bench/reads and its version each published one.
"""
import http.client
import json
import sys
import urllib.parse

base, token, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
template = json.load(open(sys.argv[4] if len(sys.argv) > 4 else "examples/files-1.1.0.json"))
template["name"] = "io.github.bench/reads"
url = urllib.parse.urlsplit(base)
conn = http.client.HTTPConnection(url.hostname, url.port)
for i in range(1, count + 1):
    version = f"1.0.{i}"
    template["version"] = version
    body = json.dumps(template).encode()
    path = f"/v1/tenants/dev/servers/io.github.bench%2Freads/versions/{version}"
    conn.request("PUT", path, body, {"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    resp = conn.getresponse()
    answer = resp.read()
    if resp.status not in (200, 201):
        sys.exit(f"publishing {version}: {resp.status} {answer[:300]!r}")
print(f"published {count} versions of io.github.bench/reads ({len(body)} bytes each)")
