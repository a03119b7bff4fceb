#!/usr/bin/env python3
"""Compares the official conformance suite's server scenarios run against a
server directly and through the Pinfold guard: every scenario that passes
directly must pass through the guard. Prints both results side by side.

    compare.py DIRECT_DIR GUARDED_DIR
Each directory holds the suite's `-o` output: one folder per scenario run
with a checks.json (a list of checks with a `status`).
"""
import json
import pathlib
import re
import sys


def results(root):
    out = {}
    for checks in pathlib.Path(root).glob("*/checks.json"):
        name = re.sub(r"^server-", "", checks.parent.name)
        name = re.sub(r"-\d{4}-\d{2}-\d{2}T.*$", "", name)
        items = json.loads(checks.read_text())
        failed = [c for c in items if c.get("status") == "FAILURE"]
        out[name] = (len(items) - len(failed), len(failed))
    return out


def main():
    direct, guarded = results(sys.argv[1]), results(sys.argv[2])
    if not direct:
        print("no direct results", file=sys.stderr)
        return 1
    bad = []
    width = max(len(n) for n in direct)
    print(f"{'scenario':<{width}}  direct          through the guard")
    for name in sorted(direct):
        d = direct[name]
        g = guarded.get(name)
        dp = d[1] == 0
        gp = g is not None and g[1] == 0
        ds = f"{'pass' if dp else 'FAIL'} {d[0]}/{d[0] + d[1]}"
        gs = "missing" if g is None else f"{'pass' if gp else 'FAIL'} {g[0]}/{g[0] + g[1]}"
        print(f"{name:<{width}}  {ds:<14}  {gs}")
        if dp and not gp:
            bad.append(name)
    passed = sum(1 for d in direct.values() if d[1] == 0)
    print(f"\n{passed} scenarios pass directly; "
          f"{passed - len(bad)} of them pass through the guard")
    if bad:
        print("pass directly but not through the guard: " + ", ".join(bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
