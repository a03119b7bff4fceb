"""Structural check of examples/github-actions/pinfold.yml against the CLI.

Checks: the workflow runs on a published release; three jobs split the
work so that no code of the server under test runs where a publisher token
can be minted: the job running `pinfold capture` has no `id-token`
permission and reads contents only; the job running `pinfold publish` needs
the capture job, declares an `environment` (the claim the publisher rule
requires), has `id-token: write` and `contents: read` only, and runs nothing
but pinfold (no npm, build or server step, no checkout); the job running
`pinfold verify` needs the publish job. Publish authenticates with
`--github-oidc` (no token from a secret) and waits with `--wait-approved`;
verify checks a live server (`--against`); and every `--flag` of every
`pinfold` command exists in that subcommand's `--help` of the binary built
from this tree, so the example cannot drift from the CLI. Then it mutates
the workflow in ways that must be refused (id-token granted to the capture
job, the publish job without its environment, a build step in the publish
job, verify not waiting for publish, a push trigger, an unknown flag, a
secret token instead of OIDC) and checks each is refused for the right
reason.

Usage: python3 scripts/check-github-workflow.py [REPO_ROOT]   (needs PyYAML;
the binary: $PINFOLD_BIN, default target/debug/pinfold)
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
WORKFLOW = ROOT / "examples/github-actions/pinfold.yml"
BIN = pathlib.Path(os.environ.get("PINFOLD_BIN", ROOT / "target/debug/pinfold"))
ORDER = ["capture", "publish", "verify"]

_help_cache = {}


def help_flags(sub):
    """The long flags `pinfold SUB --help` lists, or None when SUB is not a command."""
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


def pinfold_commands(run):
    """Each `pinfold SUB ...` command line of a `run:` script, as argv lists."""
    script = re.sub(r"\\\n", " ", run)
    found = []
    for line in script.splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError as e:
            raise ValueError(f"cannot split {line!r}: {e}")
        # The command word itself (not an argument such as a repository URL
        # ending in /pinfold).
        if words and (words[0] == "pinfold" or words[0].endswith("/pinfold")) and len(words) > 1:
            found.append(words[1:])
    return found


# Words that mark a step as running the repository's code (building or
# starting the server under test) rather than pinfold alone.
CODE_STEP = re.compile(r"\b(npm|npx|yarn|pnpm|node|bun|deno|python3?|pip|uv|make|go|docker|cargo build|cargo run)\b")


def needs(job):
    n = job.get("needs") or []
    return [n] if isinstance(n, str) else list(n)


def job_cmds(job_name, job, fail):
    cmds = []
    for n, step in enumerate(job.get("steps") or []):
        run = step.get("run")
        if not isinstance(run, str):
            continue
        try:
            found = pinfold_commands(run)
        except ValueError as e:
            fail(f"jobs.{job_name}.steps[{n}]: {e}")
            continue
        for argv in found:
            cmds.append((n, argv, step))
    return cmds


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
    # Which job runs each pinfold command.
    owner = {}
    for job_name, job in jobs.items():
        perms = job.get("permissions", wf.get("permissions"))
        perms = perms if isinstance(perms, dict) else {}
        cmds = job_cmds(job_name, job, fail)
        subs = {argv[0] for _, argv, _ in cmds}
        for s in subs & set(ORDER):
            if s in owner:
                fail(f"jobs.{job_name}: `pinfold {s}` also runs in jobs.{owner[s]} (one job per step)")
            owner.setdefault(s, job_name)
        if perms.get("id-token") == "write" and "capture" in subs:
            fail(f"jobs.{job_name}: runs the server under test (pinfold capture) and must not have id-token: write")
        if any(v == "write" for k, v in perms.items() if k != "id-token"):
            fail(f"jobs.{job_name}: permissions must not grant write access other than id-token")
        if subs & {"publish", "verify"}:
            if perms.get("id-token") != "write":
                fail(f"jobs.{job_name}: needs permissions id-token: write (for --github-oidc)")
        if "publish" in subs:
            if not job.get("environment"):
                fail(f"jobs.{job_name}: the publish job must declare an environment (the publisher claim rule requires it)")
            if subs - {"publish"}:
                fail(f"jobs.{job_name}: the publish job must run nothing but `pinfold publish` (found {sorted(subs)})")
            for n, step in enumerate(job.get("steps") or []):
                run = str(step.get("run", ""))
                uses = str(step.get("uses", ""))
                code = [l for l in run.splitlines() if CODE_STEP.search(l) and "cargo install" not in l]
                if code or uses.startswith("actions/checkout"):
                    fail(f"jobs.{job_name}.steps[{n}]: the publish job must not check out, build or run the server ({(code or [uses])[0].strip()!r})")
        for n, argv, step in cmds:
            sub = argv[0]
            where = f"jobs.{job_name}.steps[{n}] pinfold {sub}"
            flags = help_flags(sub)
            if flags is None:
                fail(f"{where}: `pinfold {sub}` is not a command of {BIN}")
                continue
            for word in argv[1:]:
                if word.startswith("--"):
                    name = word[2:].split("=", 1)[0]
                    if name not in flags:
                        fail(f"{where}: --{name} is not a flag of `pinfold {sub}` (its --help lists {sorted(flags)})")
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
    for s in ORDER:
        if s not in owner:
            fail(f"no job runs `pinfold {s}`")
    # The job graph: capture -> publish -> verify.
    for before, after in zip(ORDER, ORDER[1:]):
        if before in owner and after in owner:
            b, a = owner[before], owner[after]
            if b == a:
                fail(f"jobs.{a}: runs `pinfold {before}` and `pinfold {after}` in one job (they need separate jobs)")
            elif b not in needs(jobs[a]):
                fail(f"jobs.{a}: must have `needs: {b}` (pinfold {after} runs after pinfold {before})")
    return errors


def job_running(wf, sub):
    for name, job in wf["jobs"].items():
        for step in job.get("steps") or []:
            if f"pinfold {sub}" in str(step.get("run", "")):
                return name, job, step
    raise AssertionError(f"no {sub} step")


def publish_step(wf):
    return job_running(wf, "publish")[2]


def id_token_for_capture(wf):
    job_running(wf, "capture")[1]["permissions"] = {"id-token": "write", "contents": "read"}


def no_environment(wf):
    job_running(wf, "publish")[1].pop("environment", None)


def build_in_publish(wf):
    job_running(wf, "publish")[1]["steps"].insert(0, {"name": "build", "run": "npm ci\nnpm run build"})


def verify_not_after_publish(wf):
    job_running(wf, "verify")[1]["needs"] = job_running(wf, "capture")[0]


def no_id_token(wf):
    wf["permissions"] = {"contents": "read"}
    for job in wf["jobs"].values():
        job["permissions"] = {"contents": "read"}


def on_push(wf):
    wf.pop("on", None)
    wf.pop(True, None)
    wf["on"] = {"push": {"branches": ["main"]}}


def unknown_flag(wf):
    s = publish_step(wf)
    s["run"] = s["run"].replace("--wait-approved", "--wait-approved --bogus-flag")


def secret_token(wf):
    s = publish_step(wf)
    s["run"] = s["run"].replace("--github-oidc", "--token-env PINFOLD_TOKEN")
    s["env"] = {"PINFOLD_TOKEN": "${{ secrets.PINFOLD_TOKEN }}"}


MUST_FAIL = [
    (id_token_for_capture, "must not have id-token: write"),
    (no_environment, "must declare an environment"),
    (build_in_publish, "must not check out, build or run the server"),
    (verify_not_after_publish, "must have `needs: publish`"),
    (no_id_token, "id-token: write (for --github-oidc)"),
    (on_push, "must run on release"),
    (unknown_flag, "--bogus-flag is not a flag of `pinfold publish`"),
    (secret_token, "--github-oidc"),
]


def main():
    if not BIN.is_file() or not os.access(BIN, os.X_OK):
        print(f"no pinfold binary at {BIN}; build it (cargo build --bin pinfold) or set PINFOLD_BIN", file=sys.stderr)
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
    print(f"{WORKFLOW.relative_to(ROOT)}: ok (release trigger; jobs capture (no id-token) -> publish (environment, id-token, pinfold only, --github-oidc --wait-approved) -> verify --against; flags checked against {BIN}; {len(MUST_FAIL)} mutations refused)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
