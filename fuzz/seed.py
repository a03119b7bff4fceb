#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (fuzz/corpus/<target>/).

Every input is *derived* from the shapes of the real-world data set (the
directory named by $PINFOLD_REALDATA): tools, scope requirements, scope
hierarchies and server.json entries are trimmed, mutated and combined, and
never copied file for file. The output is deterministic (a fixed random
seed), so re-running the script gives the same files; the corpus stays small
(well under 1 MB in all).

    PINFOLD_REALDATA=/path/to/realdata python3 fuzz/seed.py
"""

import base64
import copy
import hashlib
import json
import os
import random
import re
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
MAX_FILE = 6 * 1024
rng = random.Random(13)

# The scope alphabet of fuzz_targets/scope_plan.rs, read from it (one list,
# so that the seeds encode what the target decodes).
ALPHABET = re.findall(
    r'"([^"]+)"',
    re.search(r"const ALPHABET: \[&str; \d+\] = \[(.*?)\];",
              (HERE / "fuzz_targets" / "scope_plan.rs").read_text(), re.S).group(1),
)


def realdata() -> Path:
    root = os.environ.get("PINFOLD_REALDATA")
    if not root or not Path(root).is_dir():
        sys.exit("set PINFOLD_REALDATA to the real-world data directory")
    return Path(root)


def load(path: Path):
    with path.open(encoding="utf-8") as f:
        return json.load(f)


def trim_text(s: str, n: int) -> str:
    return s if len(s) <= n else s[:n].rstrip()


def slim_tool(tool: dict) -> dict:
    """A tool reduced to what the targets look at, with short texts."""
    t = {"name": tool["name"]}
    if "description" in tool:
        t["description"] = trim_text(tool["description"], rng.choice([0, 24, 60]))
    schema = copy.deepcopy(tool.get("inputSchema", {"type": "object"}))
    for prop in schema.get("properties", {}).values():
        if isinstance(prop, dict) and "description" in prop:
            prop["description"] = trim_text(prop["description"], 16)
    props = list(schema.get("properties", {}).items())
    if len(props) > 4:
        keep = dict(rng.sample(props, 4))
        schema["properties"] = keep
        if "required" in schema:
            schema["required"] = [r for r in schema["required"] if r in keep]
    t["inputSchema"] = schema
    if "annotations" in tool:
        ann = {k: v for k, v in tool["annotations"].items() if k != "title"}
        t["annotations"] = ann
    return t


def example_value(schema, depth=0):
    """A value of the given JSON Schema's type (for arguments)."""
    if not isinstance(schema, dict) or depth > 3:
        return None
    if "enum" in schema:
        return rng.choice(schema["enum"])
    ty = schema.get("type")
    if isinstance(ty, list):
        ty = ty[0]
    if ty == "string":
        return rng.choice(["octocat", "main", "caf\u00e9", "a/b", "", "\u20ac$\u000f"])
    if ty == "integer":
        return rng.choice([0, 1, 30, 100, -1, 2**53])
    if ty == "number":
        return rng.choice([1.0, 0.5, 1e21, 1e-7, -0.0])
    if ty == "boolean":
        return rng.choice([True, False])
    if ty == "array":
        return [example_value(schema.get("items", {}), depth + 1) for _ in range(rng.randint(0, 2))]
    if ty == "object":
        return {
            k: example_value(v, depth + 1)
            for k, v in list(schema.get("properties", {}).items())[:5]
        }
    return None


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Writer:
    def __init__(self, target: str):
        self.dir = CORPUS / target
        self.count = 0

    def add(self, data):
        if isinstance(data, str):
            data = data.encode()
        if len(data) > MAX_FILE:
            return
        name = hashlib.sha1(data).hexdigest()[:16]
        (self.dir / name).write_bytes(data)
        self.count += 1


def dumps(value, style: int) -> str:
    """One of several spellings of the same value."""
    if style == 0:
        return json.dumps(value, separators=(",", ":"))
    if style == 1:
        return json.dumps(value, indent=2, sort_keys=True)
    return json.dumps(value, ensure_ascii=True, indent=None)


def seed_json_card(rd: Path, tools: list, registry: list):
    w = Writer("json_card")
    for i in range(40):
        picked = rng.sample(tools, rng.randint(1, 3))
        sig_tools = [slim_tool(t) for t in picked]
        if rng.random() < 0.4 and "annotations" in sig_tools[0]:
            # Annotations as possibilities: the signature's worst-case form.
            a = sig_tools[0]["annotations"]
            b = dict(a, readOnlyHint=not a.get("readOnlyHint", False))
            sig_tools[0]["annotations"] = [a, b]
        if rng.random() < 0.3:
            sig_tools[0]["resolve"] = True
        entry = rng.choice(registry)
        card = {
            "name": entry.get("name", "io.github.example/server"),
            "version": rng.choice(["1.0.0", "0.3.1", "2.0.0-rc.1", "latest", "^1.2"]),
            "description": trim_text(entry.get("description", ""), rng.choice([40, 99, 140])),
            "signature": {"tools": sig_tools},
        }
        if "remotes" in entry and rng.random() < 0.5:
            card["remotes"] = entry["remotes"][:1]
        text = dumps(card, i % 3)
        w.add(text)
        if i % 5 == 0:
            # A duplicate key, spelled in place.
            w.add(text.replace('"version"', '"name": "x/y", "version"', 1))
        if i % 7 == 0:
            w.add(text[: len(text) * 2 // 3])  # truncated
    # server.json entries without a signature, trimmed.
    for entry in rng.sample(registry, 12):
        e = {k: entry[k] for k in ("name", "description", "version", "repository") if k in entry}
        w.add(dumps(e, 0))
    deep = "[" * 70 + "1" + "]" * 70
    w.add(deep)
    return w.count


def seed_canon(rd: Path, tools: list, registry: list):
    w = Writer("canon")
    numbers = [
        "[333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001]",
        "[5e-324, -1.7976931348623157e308, 9007199254740992, 295147905179352825856]",
        "[1e23, 9.999999999999997e-7, 1424953923781206.25, -0.0, 1.0, 100, 1e21, 1e20]",
        '{"\\u20ac": 1, "\\r": 2, "\\ufb33": 3, "1": 4, "\\ud83d\\ude00": 5, "\\u0080": 6}',
        '"\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/"',
    ]
    for n in numbers:
        w.add(n)
    for i in range(30):
        t = rng.choice(tools)
        value = rng.choice([t.get("inputSchema"), t.get("annotations"), t.get("_meta")])
        if value is None:
            continue
        w.add(dumps(value, i % 3))
    for entry in rng.sample(registry, 10):
        e = {k: v for k, v in entry.items() if k in ("name", "version", "packages", "remotes")}
        w.add(dumps(e, rng.randint(0, 2)))
    return w.count


def seed_bearer(rd: Path, registry: list):
    w = Writer("bearer")
    headers = [{"alg": "EdDSA", "typ": "JWT"}, {"alg": "RS256", "kid": "k1"}, {"alg": "none"}]
    for i, entry in enumerate(rng.sample(registry, 20)):
        repo = (entry.get("repository") or {}).get("url", "https://github.com/acme/x")
        slug = "/".join(repo.rstrip("/").split("/")[-2:])
        claims = {
            "iss": rng.choice(["https://token.actions.githubusercontent.com", "pinfold-dev", 42]),
            "sub": f"repo:{slug}:ref:refs/heads/main",
            "aud": "pinfold",
            "exp": 1_900_000_000 + i,
            "repository": slug,
            "tenant": slug.split("/")[0].lower(),
            "roles": ["publisher"],
        }
        if i % 4 == 0:
            del claims["iss"]
        token = ".".join(
            [
                b64(json.dumps(rng.choice(headers)).encode()),
                b64(json.dumps(claims).encode()),
                b64(hashlib.sha256(slug.encode()).digest()),
            ]
        )
        scheme = rng.choice(["Bearer", "bearer", "BEARER", "Basic", "Bearer\t"])
        pad = rng.choice(["", " ", "  \t", "="])
        w.add(f"{scheme} {token}{pad}")
        if i % 3 == 0:
            w.add(token + ".extra")  # four segments
        if i % 5 == 0:
            w.add(json.dumps(claims))  # the construct-and-recover branch
    w.add("Bearer")
    w.add("Bearer a.b")
    return w.count


def seed_resolve_key(rd: Path, tools: list):
    w = Writer("resolve_key")
    tenants = ["acme", "dev", "t1", "\u00e9quipe"]
    for i in range(40):
        t = rng.choice(tools)
        args = example_value(t.get("inputSchema", {"type": "object"})) or {}
        tenant = rng.choice(tenants)
        session = f"s{rng.randint(0, 999):03}"
        head = f"{tenant}\0{session}\0{t['name']}\0"
        w.add(head + dumps(args, i % 3))
    return w.count


def seed_scope_plan(rd: Path):
    w = Writer("scope_plan")
    gh = load(rd / "github-scopes.json")["details"]
    hier = load(rd / "github-scope-hierarchy.json")["github_mcp_server_ScopeHierarchy"]["hierarchy"]
    idx = {s: i for i, s in enumerate(ALPHABET)}
    covers = [(k, [x for x in v if x in idx]) for k, v in hier.items() if k in idx]
    sentry = load(rd / "scopes" / "sentry-tools.json")["tools"]

    def scopes_bytes(scopes, cap):
        s = [idx[x] for x in scopes if x in idx][:cap]
        return [len(s)] + s

    def alt_bytes(detail):
        kind = detail["requirement"]
        accepted = detail.get("accepted") or detail.get("required") or []
        if kind == "none":
            return [1, 0]  # one alternative: noauth
        if kind == "any_of":
            alts = [[2] + scopes_bytes([s], 3) for s in accepted[:3]]
            return [len(alts)] + [b for a in alts for b in a]
        return [1, 2] + scopes_bytes(accepted, 3)

    details = list(gh.values())
    for i in range(40):
        out = []
        chosen = rng.sample(covers, rng.randint(0, min(7, len(covers))))
        out.append(len(chosen))
        for k, v in chosen:
            out += [idx[k]] + scopes_bytes(v, 3)
        if i % 4 == 0:
            out += [1, idx["security_events"], 1, idx["repo"]]
        else:
            out.append(0)
        out += scopes_bytes(["repo"] if i % 2 else [], 2)  # provider defaults
        out += scopes_bytes(rng.sample(ALPHABET, rng.randint(0, 2)), 3)  # granted
        calls = rng.sample(details, rng.randint(1, 5))
        out.append(len(calls) - 1)
        for d in calls:
            out += [0] + alt_bytes(d)
        data = bytes(out)
        if i % 3 == 0:
            # A tail call in JSON: a Sentry tool's requirement (all of).
            req = rng.choice(list(sentry.values()))
            schemes = [{"type": "oauth2", "scopes": req}] if req else [{"type": "noauth"}]
            if i % 2:
                schemes.append({"type": "apiKey"})
            data += b"|" + json.dumps(schemes).encode()
        w.add(data)
    return w.count


def seed_resolve_result(rd: Path, tools: list):
    w = Writer("resolve_result")
    annotations = [t["annotations"] for t in tools if "annotations" in t]
    names = ["manage_files", "manage_files_dynamic", "list_files"]
    for i in range(40):
        pick = i % 3
        name = names[pick]
        ann = {k: v for k, v in rng.choice(annotations).items() if k != "title"}
        shape = i % 4
        if shape == 0:
            src = slim_tool(rng.choice(tools))
            tool = {"name": name, "inputSchema": src["inputSchema"], "annotations": ann}
            result = {"tool": tool}
        elif shape == 1:
            result = {"resultType": "complete", "name": name, "annotations": ann}
        elif shape == 2:
            result = {"annotations": ann, "_meta": {"reason": "derived"}}
        else:
            result = {"jsonrpc": "2.0", "id": i, "result": {"tool": {"name": name, "annotations": ann}}}
        w.add(bytes([pick]) + dumps(result, i % 3).encode())
    return w.count


def seed_message_head(rd: Path, tools: list):
    """Client messages as MCP clients send them: calls of real tools with
    arguments named after their input schemas' properties, lists and
    initializations on both protocol revisions, notifications; in several
    spellings, some with non-ASCII text escaped as \\u."""
    w = Writer("message_head")
    modern = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "seed", "version": "1"},
    }
    with_extension = copy.deepcopy(modern)
    with_extension["io.modelcontextprotocol/clientCapabilities"] = {
        "extensions": {"io.modelcontextprotocol/tool-resolution": {}}
    }
    for i in range(48):
        tool = slim_tool(rng.choice(tools))
        props = list((tool.get("inputSchema") or {}).get("properties", {}).keys())[:4]
        arguments = {p: rng.choice(["/tmp", 3, True, None, ["a"], "caf\u00e9"]) for p in props}
        kind = i % 6
        msg_id = rng.choice([i, f"req-{i}", -i, 0.5 + i])
        if kind == 0:
            msg = {"jsonrpc": "2.0", "id": msg_id, "method": "tools/call",
                   "params": {"name": tool["name"], "arguments": arguments}}
        elif kind == 1:
            msg = {"jsonrpc": "2.0", "id": msg_id, "method": "tools/call",
                   "params": {"name": tool["name"], "arguments": arguments, "_meta": modern}}
        elif kind == 2:
            msg = {"jsonrpc": "2.0", "id": msg_id, "method": "tools/list",
                   "params": {"_meta": rng.choice([modern, with_extension])}}
        elif kind == 3:
            msg = {"jsonrpc": "2.0", "id": msg_id, "method": "initialize",
                   "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                              "clientInfo": {"name": "seed", "version": "1"}}}
        elif kind == 4:
            msg = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        else:
            msg = {"jsonrpc": "2.0", "id": msg_id, "method": "resources/read",
                   "params": {"uri": "file:///" + tool["name"]}}
        style = i % 3
        text = json.dumps(msg, ensure_ascii=(style == 2), separators=(",", ":") if style == 0 else None)
        w.add(text)
    return w.count


def main():
    rd = realdata()
    tools = [load(p) for p in sorted((rd / "github-toolsnaps").glob("*.json"))]
    for p in sorted((rd / "servers").glob("*.json")):
        capture = load(p)
        if isinstance(capture, dict) and isinstance(capture.get("tools"), list):
            tools += [t for t in capture["tools"] if isinstance(t, dict) and "name" in t]
    seed = load(rd / "registry" / "seed" / "seed_2025-09-29_b21c6f5.json")
    registry = seed if isinstance(seed, list) else seed.get("servers", [])
    registry = [e.get("server", e) for e in registry]
    if CORPUS.exists():
        shutil.rmtree(CORPUS)
    counts = {}
    for target in ("json_card", "canon", "bearer", "resolve_key", "scope_plan", "resolve_result",
                   "message_head"):
        (CORPUS / target).mkdir(parents=True)
    counts["json_card"] = seed_json_card(rd, tools, registry)
    counts["canon"] = seed_canon(rd, tools, registry)
    counts["bearer"] = seed_bearer(rd, registry)
    counts["resolve_key"] = seed_resolve_key(rd, tools)
    counts["scope_plan"] = seed_scope_plan(rd)
    counts["resolve_result"] = seed_resolve_result(rd, tools)
    counts["message_head"] = seed_message_head(rd, tools)
    total = sum(f.stat().st_size for f in CORPUS.rglob("*") if f.is_file())
    for k, v in counts.items():
        print(f"{k}: {v} inputs")
    print(f"total: {total} bytes")
    if total > 1024 * 1024:
        sys.exit("the corpus grew past 1 MB")


if __name__ == "__main__":
    main()
