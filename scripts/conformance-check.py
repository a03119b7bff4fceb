#!/usr/bin/env python3
"""Judges one conformance client scenario run by scripts/conformance.sh.

Usage: conformance-check.py SCENARIO DIR SUITE_EXIT_CODE

DIR holds the suite's log (suite.log), its results (results/<scenario>-*/
checks.json, stdout.txt, stderr.txt) and the card `pinfold capture` wrote
(card.json). Each scenario has its expectation (see scripts/conformance.sh
for why): a check outside it, a capture that did not write its card, or a
client that exited non-zero fails the run.
"""

import glob
import json
import os
import sys


def fail(msg):
    print(f"    {msg}")
    sys.exit(1)


def main():
    scenario, d, code = sys.argv[1], sys.argv[2], int(sys.argv[3])
    found = glob.glob(os.path.join(d, "results", f"{scenario}-*", "checks.json"))
    if len(found) != 1:
        fail(f"expected one checks.json, found {found}")
    checks = json.load(open(found[0]))
    results = os.path.dirname(found[0])
    stderr = open(os.path.join(results, "stderr.txt")).read()
    log = open(os.path.join(d, "suite.log")).read()
    if "CLIENT EXITED WITH ERROR" in log or "CLIENT TIMED OUT" in log:
        fail(f"pinfold capture did not succeed:\n{stderr}")
    card_path = os.path.join(d, "card.json")
    if not os.path.isfile(card_path):
        fail(f"pinfold capture wrote no card:\n{stderr}")
    card = json.load(open(card_path))
    tools = [t["name"] for t in card["signature"]["tools"]]
    by_status = {}
    for c in checks:
        by_status.setdefault(c["status"], []).append(c["id"])
    failures = sorted(by_status.get("FAILURE", []))
    warnings = sorted(by_status.get("WARNING", []))
    successes = by_status.get("SUCCESS", [])
    # The requests the suite's server saw (absent from the initialize
    # scenario, whose checks do not log them).
    methods = [
        c.get("details", {}).get("mcpMethod") or c.get("details", {}).get("jsonrpcMethod")
        for c in checks
        if c["id"] == "incoming-request"
    ]

    if scenario == "initialize":
        if code != 0 or failures or warnings:
            fail(f"exit {code}, failures {failures}, warnings {warnings}")
        if "mcp-client-initialization" not in successes:
            fail(f"no successful mcp-client-initialization check: {checks}")
    elif scenario == "tools_call":
        # The one check that cannot apply: a capture never calls a tool.
        if failures != ["tool-add-numbers"] or warnings:
            fail(f"failures {failures} (only tool-add-numbers may fail), warnings {warnings}")
        if "initialize" not in methods or "tools/list" not in methods:
            fail(f"the server saw {methods}")
        if tools != ["add_numbers"]:
            fail(f"the card lists {tools}")
    elif scenario == "sse-retry":
        # Timing checks of a tools/call stream a capture never opens.
        allowed = ["client-sse-last-event-id", "client-sse-retry-timing"]
        if failures or any(w not in allowed for w in warnings):
            fail(f"failures {failures}, warnings {warnings} (only {allowed} may warn)")
        if "client-sse-graceful-reconnect" not in successes:
            fail("the client opened no GET event stream")
        if "initialize" not in methods or "tools/list" not in methods:
            fail(f"the server saw {methods}")
        if tools != ["test_reconnection"]:
            fail(f"the card lists {tools}")
    else:
        fail(f"no expectation for scenario {scenario}")
    print(f"    checks: {len(successes)} passed, {len(failures)} failed, {len(warnings)} warnings")


if __name__ == "__main__":
    main()
