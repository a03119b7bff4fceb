#!/usr/bin/env python3
"""Counts PostgreSQL round trips per API request of a `pinfold` binary.

    pg-roundtrips.py PINFOLD_BIN [PG_URL] [N]

Starts `PINFOLD_BIN serve --dev` on a fresh database (created and dropped on
the PostgreSQL of PG_URL, default postgres://postgres@127.0.0.1:5432/postgres,
which must be allowed to create databases), with a pool of two connections (one is taken by the change listener)
behind a counting TCP proxy, warms it up (the first use of a statement on a
connection prepares it), then runs N (default 200) requests of each kind
and prints round trips per request.

A round trip is counted each time the client starts sending after it last
received (bytes one flush carries count once, so pipelined messages count
as one). Everything on the wire counts, including what the server does off
the request's path: sqlx's check of each connection returned to the pool
(which also carries a queued ROLLBACK) and the registry's NOTIFY after a
publish. The change listener's own connection is idle and not counted.
"""
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

BIN = sys.argv[1]
PG_URL = sys.argv[2] if len(sys.argv) > 2 else "postgres://postgres@127.0.0.1:5432/postgres"
N = int(sys.argv[3]) if len(sys.argv) > 3 else 200

pg = urllib.parse.urlsplit(PG_URL)
PG_HOST, PG_PORT = pg.hostname, pg.port or 5432


class Counter:
    def __init__(self):
        self.lock = threading.Lock()
        self.trips = {}  # connection number -> client turns

    def total(self, skip=()):
        with self.lock:
            return sum(v for k, v in self.trips.items() if k not in skip)


counter = Counter()


def proxy(listen_sock):
    n = 0
    while True:
        client, _ = listen_sock.accept()
        n += 1
        upstream = socket.create_connection((PG_HOST, PG_PORT))
        for s in (client, upstream):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        state = {"last": "server"}
        with counter.lock:
            counter.trips[n] = 0

        def pump(src, dst, direction, conn=n, state=state):
            try:
                while True:
                    data = src.recv(65536)
                    if not data:
                        break
                    if direction == "client" and state["last"] == "server":
                        with counter.lock:
                            counter.trips[conn] += 1
                    state["last"] = direction
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                for s in (src, dst):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        threading.Thread(target=pump, args=(client, upstream, "client"), daemon=True).start()
        threading.Thread(target=pump, args=(upstream, client, "server"), daemon=True).start()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def psql(sql):
    subprocess.run(["psql", PG_URL, "-Atqc", sql], check=True)


def main():
    db = f"pinfold_rt_{os.getpid()}"
    psql(f"DROP DATABASE IF EXISTS {db}")
    psql(f"CREATE DATABASE {db}")
    listen_sock = socket.socket()
    listen_sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listen_sock.bind(("127.0.0.1", 0))
    listen_sock.listen(64)
    proxy_port = listen_sock.getsockname()[1]
    threading.Thread(target=proxy, args=(listen_sock,), daemon=True).start()
    userinfo = pg.netloc.rsplit("@", 1)[0] + "@" if "@" in pg.netloc else ""
    url = f"postgres://{userinfo}127.0.0.1:{proxy_port}/{db}"
    port = free_port()
    data = tempfile.mkdtemp(prefix="pinfold-rt-")
    env = dict(os.environ, PINFOLD_POSTGRES__MAX_CONNECTIONS="2", RUST_LOG="warn")
    server = subprocess.Popen(
        [BIN, "serve", "--dev", "--listen", f"127.0.0.1:{port}", "--data-dir", data,
         "--database-url", url],
        env=env, stdout=subprocess.DEVNULL, stderr=None if os.environ.get("RT_DEBUG") else subprocess.DEVNULL)
    try:
        run(port, data)
    finally:
        server.terminate()
        server.wait()
        psql(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")


def run(port, data):
    conn = http.client.HTTPConnection("127.0.0.1", port)
    for _ in range(100):
        try:
            conn.request("GET", "/readyz")
            r = conn.getresponse()
            r.read()
            if r.status == 200:
                break
        except OSError:
            conn = http.client.HTTPConnection("127.0.0.1", port)
        time.sleep(0.2)
    else:
        sys.exit("the server did not become ready")
    token = subprocess.run(
        [BIN, "token", "--data-dir", data, "--sub", "bench", "--tenant", "dev",
         "--roles", "admin,publisher,reviewer,reader"],
        check=True, capture_output=True, text=True).stdout.strip()
    card = json.load(open(os.path.join(os.path.dirname(__file__), "..", "examples", "files-1.1.0.json")))
    card["name"] = "io.github.bench/rt"
    server = "io.github.bench%2Frt"
    auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def call(method, path, body=None, ok=(200, 201)):
        conn.request(method, path, body, auth)
        r = conn.getresponse()
        text = r.read()
        if r.status not in ok:
            sys.exit(f"{method} {path}: {r.status} {text[:300]!r}")

    def publish(i):
        card["version"] = f"1.0.{i}"
        call("PUT", f"/v1/tenants/dev/servers/{server}/versions/1.0.{i}", json.dumps(card).encode())

    def read(i):
        call("GET", f"/v1/tenants/dev/servers/{server}/versions/1.0.{i}")

    def audit(_):
        call("GET", "/v1/tenants/dev/audit?limit=10")

    def policy(_):
        call("GET", "/v1/tenants/dev/policy")

    # Warm-up: every statement prepared once on the one pooled connection.
    for i in range(N + 1, N + 11):
        publish(i)
        read(i)
        audit(i)
        policy(i)
    time.sleep(0.5)
    results = {}
    for name, f, offset in (("publish", publish, 0), ("read", read, 0),
                            ("audit", audit, 0), ("policy", policy, 0)):
        before = counter.total()
        for i in range(1, N + 1):
            f(i + offset)
        time.sleep(0.5)  # let the release checks and NOTIFYs land
        results[name] = (counter.total() - before) / N
    print(json.dumps({"binary": BIN, "requests_each": N, "round_trips_per_request": results}))


if __name__ == "__main__":
    main()
