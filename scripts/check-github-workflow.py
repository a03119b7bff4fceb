#!/usr/bin/env python3
"""Structural check of examples/github-actions/signet.yml against the CLI.

Checks: the workflow runs on a published release; the job that publishes may
request an OIDC token (`id-token: write`) and reads contents only; it runs
`signet capture`, `signet publish` and `signet verify`, in that order, in one
job; publish authenticates with `--github-oidc` (no token from a secret) and
waits with `--wait-approved`; verify checks a live server (`--against`); and
every `--flag` of every `signet` command exists in that subcommand's `--help`
of the binary built from this tree, so the example cannot drift from the CLI.
Then it mutates the workflow in ways that must be refused (no id-token
permission, a push trigger, publish after verify, an unknown flag, a secret
token instead of OIDC) and checks each is refused for the right reason.

Usage: python3 scripts/check-github-workflow.py [REPO_ROOT]   (needs PyYAML;
the binary: $SIGNET_BIN, default target/debug/signet)
"""

import copy
import os
import pathlib
import re
import shlex
import subprocess
import sys

import yaml

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
WORKFLOW = ROOT / "examples/github-actions/signet.yml"
BIN = pathlib.Path(os.environ.get("SIGNET_BIN", ROOT / "target/debug/signet"))
ORDER = ["capture", "publish", "verify"]

_help_cache = {}


def help_flags(sub):
    """The long flags `signet SUB --help` lists, or None when SUB is not a command."""
    if sub not in _help_cache:
        out = subprocess.run([str(BIN), sub, "--help"], capture_output=True, text=True)
        if out.returncode != 0:
            _help_cache[sub] = None
        else:
            # Only the options section: the after-help text may mention flags
            # of other commands.
            text = out.stdout.split("\nOptions:", 1)[-1]
            text = re.split(r"\n\S", text, maxsplit=1)[0]
            _help_cache[sub] = set(re.findall(r"(?<![\w-])--([a-z0-9][a-z0-9-]*)", text))
    return _help_cache[sub]


def triggers(wf):
    # YAML 1.1 reads a bare `on` key as the boolean true.
    on = wf.get("on", wf.get(True))
    if isinstance(on, str):
        return {on: None}
    if isinstance(on, list):
        return {t: None for t in on}
    return on or {}


def signet_commands(run):
    """Each `signet SUB ...` command line of a `run:` script, as argv lists."""
    script = re.sub(r"\\\n", " ", run)
    found = []
    for line in script.splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError as e:
            raise ValueError(f"cannot split {line!r}: {e}")
        # The command word itself (not an argument such as a repository URL
        # ending in /signet).
        if words and (words[0] == "signet" or words[0].endswith("/signet")) and len(words) > 1:
            found.append(words[1:])
    return found


def check(wf):
    errors = []
    fail = errors.append

    on = triggers(wf)
    if "release" not in on:
        fail("on: the workflow must run on release")
    else:
        types = (on.get("release") or {}).get("types") if isinstance(on.get("release"), dict) else None
        if types is not None and not {"published", "released"} & set(types):
            fail("on.release.types: must include published (or released)")
    extra = sorted(set(on) - {"release", "workflow_dispatch"})
    if extra:
        fail(f"on: unexpected triggers {extra} (publishing belongs to releases)")

    jobs = wf.get("jobs") or {}
    if not jobs:
        fail("jobs: none")
    seen_in = {}
    for job_name, job in jobs.items():
        cmds = []
        for n, step in enumerate(job.get("steps") or []):
            run = step.get("run")
            if not isinstance(run, str):
                continue
            try:
                found = signet_commands(run)
            except ValueError as e:
                fail(f"jobs.{job_name}.steps[{n}]: {e}")
                continue
            for argv in found:
                cmds.append((n, argv, step))
        if not cmds:
            continue
        subs = [argv[0] for _, argv, _ in cmds]
        seen_in[job_name] = subs
        perms = job.get("permissions", wf.get("permissions"))
        if not isinstance(perms, dict) or perms.get("id-token") != "write":
            fail(f"jobs.{job_name}: needs permissions id-token: write (for --github-oidc)")
        elif perms.get("contents") != "read" or any(
            v == "write" for k, v in perms.items() if k != "id-token"
        ):
            fail(f"jobs.{job_name}: permissions must be id-token: write and contents: read only")
        # The three commands, in order.
        positions = [subs.index(s) if s in subs else None for s in ORDER]
        for s, p in zip(ORDER, positions):
            if p is None:
                fail(f"jobs.{job_name}: no `signet {s}` step")
        present = [p for p in positions if p is not None]
        if present != sorted(present):
            fail(f"jobs.{job_name}: the signet steps must run capture, publish, verify in that order (found {subs})")
        for n, argv, step in cmds:
            sub = argv[0]
            where = f"jobs.{job_name}.steps[{n}] signet {sub}"
            flags = help_flags(sub)
            if flags is None:
                fail(f"{where}: `signet {sub}` is not a command of {BIN}")
                continue
            for word in argv[1:]:
                if word.startswith("--"):
                    name = word[2:].split("=", 1)[0]
                    if name not in flags:
                        fail(f"{where}: --{name} is not a flag of `signet {sub}` (its --help lists {sorted(flags)})")
            step_env = " ".join(str(v) for v in (step.get("env") or {}).values())
            if sub == "publish":
                if "--github-oidc" not in argv:
                    fail(f"{where}: must authenticate with --github-oidc (no long-lived secret)")
                if "--token-env" in argv or "secrets." in step_env or "secrets." in step.get("run", ""):
                    fail(f"{where}: must not take a token from a secret")
                if "--wait-approved" not in argv:
                    fail(f"{where}: must wait for approval (--wait-approved) before verify")
            if sub == "verify" and "--against" not in argv:
                fail(f"{where}: must check a live server (--against)")
    if not seen_in:
        fail("no job runs signet")
    elif not any(all(s in subs for s in ORDER) for subs in seen_in.values()):
        fail(f"no single job runs capture, publish and verify (found {seen_in})")
    return errors


def publish_step(wf):
    for job in wf["jobs"].values():
        for step in job.get("steps") or []:
            if "signet publish" in str(step.get("run", "")):
                return step
    raise AssertionError("no publish step")


def swap_publish_and_verify(wf):
    steps = next(iter(wf["jobs"].values()))["steps"]
    i = next(n for n, s in enumerate(steps) if "signet publish" in str(s.get("run", "")))
    j = next(n for n, s in enumerate(steps) if "signet verify" in str(s.get("run", "")))
    steps[i], steps[j] = steps[j], steps[i]


def no_id_token(wf):
    wf["permissions"] = {"contents": "read"}
    for job in wf["jobs"].values():
        job.pop("permissions", None)


def on_push(wf):
    wf.pop("on", None)
    wf.pop(True, None)
    wf["on"] = {"push": {"branches": ["main"]}}


def unknown_flag(wf):
    s = publish_step(wf)
    s["run"] = s["run"].replace("--wait-approved", "--wait-approved --bogus-flag")


def secret_token(wf):
    s = publish_step(wf)
    s["run"] = s["run"].replace("--github-oidc", "--token-env SIGNET_TOKEN")
    s["env"] = {"SIGNET_TOKEN": "${{ secrets.SIGNET_TOKEN }}"}


MUST_FAIL = [
    (no_id_token, "id-token: write"),
    (on_push, "must run on release"),
    (swap_publish_and_verify, "capture, publish, verify in that order"),
    (unknown_flag, "--bogus-flag is not a flag of `signet publish`"),
    (secret_token, "--github-oidc"),
]


def main():
    if not BIN.is_file() or not os.access(BIN, os.X_OK):
        print(f"no signet binary at {BIN}; build it (cargo build --bin signet) or set SIGNET_BIN", file=sys.stderr)
        return 1
    wf = yaml.safe_load(WORKFLOW.read_text())
    problems = check(wf)
    for mutate, word in MUST_FAIL:
        bad = copy.deepcopy(wf)
        mutate(bad)
        found = check(bad)
        if not any(word in e for e in found):
            problems.append(f"mutation {mutate.__name__} was not refused for {word!r} (got {found})")
    if problems:
        for p in problems:
            print(f"{WORKFLOW.relative_to(ROOT)}: {p}", file=sys.stderr)
        return 1
    print(f"{WORKFLOW.relative_to(ROOT)}: ok (release trigger, id-token permission, capture -> publish --github-oidc --wait-approved -> verify --against, flags checked against {BIN}; {len(MUST_FAIL)} mutations refused)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
