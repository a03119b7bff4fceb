#!/usr/bin/env python3
"""Structural check of docker-compose.yml, deploy/otel-collector.yaml and the
Dockerfile (no Docker engine needed).

Checks: the expected services exist; every long-running service has a health
check (except those listed in NO_HEALTHCHECK, with the reason); `migrate` is a
one-shot that Pinfold waits for; dependencies name real services with valid
conditions and form no cycle; published ports are well-formed, loopback-bound
and unique; Pinfold reaches PostgreSQL and the collector by service name; the
collector's pipelines reference defined components and export traces to
Jaeger; the Dockerfile is multi-stage, `--locked`, non-root, with a health
check and `pinfold` as entrypoint. When the docker client has the compose
plugin, `docker compose config` must accept the file too.

Usage: python3 scripts/check-compose.py [REPO_ROOT]   (needs PyYAML)
"""

import pathlib
import re
import shutil
import subprocess
import sys

import yaml

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
EXPECTED = {"postgres", "migrate", "pinfold", "otel-collector", "jaeger"}
# Services without a compose healthcheck, and why.
NO_HEALTHCHECK = {
    "migrate": "one-shot; Pinfold waits for service_completed_successfully",
    "otel-collector": "FROM scratch image (no shell); health_check extension on :13133",
}
CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}

errors = []


def fail(msg):
    errors.append(msg)


def env_of(svc):
    env = svc.get("environment") or {}
    if isinstance(env, list):
        env = dict(e.split("=", 1) if "=" in e else (e, "") for e in env)
    return env


def deps_of(svc):
    deps = svc.get("depends_on") or {}
    if isinstance(deps, list):
        return {d: {"condition": "service_started"} for d in deps}
    return deps


def container_port(spec):
    """'127.0.0.1:8080:8080' -> (host_ip, host_port, container_port)."""
    if isinstance(spec, dict):
        return spec.get("host_ip", ""), str(spec.get("published", "")), str(spec.get("target", ""))
    parts = str(spec).split("/")[0].split(":")
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    if len(parts) == 2:
        return "", parts[0], parts[1]
    return "", "", parts[0]


def check_compose():
    path = ROOT / "docker-compose.yml"
    doc = yaml.safe_load(path.read_text())
    services = doc.get("services") or {}
    missing = EXPECTED - set(services)
    if missing:
        fail(f"docker-compose.yml: missing services {sorted(missing)}")
    published = {}
    for name, svc in services.items():
        if not (svc.get("image") or svc.get("build")):
            fail(f"{name}: neither image nor build")
        img = svc.get("image", "")
        if img and not svc.get("build") and (":" not in img or img.endswith(":latest")):
            fail(f"{name}: pin the image version ({img!r})")
        hc = svc.get("healthcheck")
        if name in NO_HEALTHCHECK:
            pass
        elif not hc or not hc.get("test") or hc.get("disable"):
            fail(f"{name}: no healthcheck")
        for dep, spec in deps_of(svc).items():
            if dep not in services:
                fail(f"{name}: depends on unknown service {dep!r}")
            cond = (spec or {}).get("condition", "service_started")
            if cond not in CONDITIONS:
                fail(f"{name}: unknown depends_on condition {cond!r}")
            if cond == "service_healthy" and dep in services and not services[dep].get("healthcheck"):
                fail(f"{name}: waits for {dep} to be healthy, but {dep} has no healthcheck")
        for p in svc.get("ports") or []:
            ip, host, target = container_port(p)
            if not target.isdigit() or (host and not host.isdigit()):
                fail(f"{name}: malformed port {p!r}")
            if ip not in ("127.0.0.1", "::1"):
                fail(f"{name}: port {p!r} should be bound to 127.0.0.1 (local stack)")
            if host in published:
                fail(f"{name}: host port {host} also published by {published[host]}")
            published[host] = name
    # No dependency cycles.
    seen, stack = set(), set()

    def visit(n):
        if n in stack:
            fail(f"dependency cycle through {n}")
            return
        if n in seen or n not in services:
            return
        stack.add(n)
        for d in deps_of(services[n]):
            visit(d)
        stack.discard(n)
        seen.add(n)

    for n in services:
        visit(n)

    if not EXPECTED <= set(services):
        return
    sig, mig = services["pinfold"], services["migrate"]
    if (sig.get("command") or [None])[0] != "serve":
        fail("pinfold: command must be `serve ...`")
    if (mig.get("command") or [None])[0] != "migrate":
        fail("migrate: command must be `migrate`")
    if str(mig.get("restart", "no")) != "no":
        fail("migrate: a one-shot must not restart")
    sdeps = deps_of(sig)
    if (sdeps.get("migrate") or {}).get("condition") != "service_completed_successfully":
        fail("pinfold: must wait for migrate (service_completed_successfully)")
    if (sdeps.get("postgres") or {}).get("condition") != "service_healthy":
        fail("pinfold: must wait for a healthy postgres")
    if (deps_of(mig).get("postgres") or {}).get("condition") != "service_healthy":
        fail("migrate: must wait for a healthy postgres")
    for n in ("pinfold", "migrate"):
        url = env_of(services[n]).get("PINFOLD_DATABASE_URL", "")
        if not re.match(r"^postgres(ql)?://[^@]*@postgres:5432/", url):
            fail(f"{n}: PINFOLD_DATABASE_URL must point at the postgres service ({url!r})")
    if str(env_of(sig).get("PINFOLD_MIGRATE_ON_START", "")).lower() != "false":
        fail("pinfold: PINFOLD_MIGRATE_ON_START must be false (the migrate service applies them)")
    otlp = env_of(sig).get("OTEL_EXPORTER_OTLP_ENDPOINT", "")
    if otlp != "http://otel-collector:4318":
        fail(f"pinfold: OTEL_EXPORTER_OTLP_ENDPOINT must be the collector's OTLP/HTTP port ({otlp!r})")
    if not any(container_port(p)[2] == "8080" for p in sig.get("ports") or []):
        fail("pinfold: port 8080 is not published")
    if not any(container_port(p)[2] == "16686" for p in services["jaeger"].get("ports") or []):
        fail("jaeger: UI port 16686 is not published")
    if sig.get("read_only") is not True:
        fail("pinfold: read_only root filesystem expected")
    test = " ".join(sig.get("healthcheck", {}).get("test", []))
    if "/readyz" not in test and "/healthz" not in test:
        fail("pinfold: healthcheck should probe /readyz or /healthz")
    # Mounted files exist.
    for n, svc in services.items():
        for v in svc.get("volumes") or []:
            src = str(v).split(":")[0]
            if src.startswith("./") and not (ROOT / src).exists():
                fail(f"{n}: mounts missing file {src}")
        b = svc.get("build")
        ctx = b if isinstance(b, str) else (b or {}).get("context") if b else None
        if ctx and not (ROOT / ctx / "Dockerfile").exists():
            fail(f"{n}: build context {ctx} has no Dockerfile")


def check_collector():
    cfg = yaml.safe_load((ROOT / "deploy/otel-collector.yaml").read_text())
    service = cfg.get("service") or {}
    for ext in service.get("extensions") or []:
        if ext not in (cfg.get("extensions") or {}):
            fail(f"otel-collector: extension {ext} not defined")
    pipelines = service.get("pipelines") or {}
    for kind in ("traces", "metrics"):
        if kind not in pipelines:
            fail(f"otel-collector: no {kind} pipeline")
    for pname, p in pipelines.items():
        for section in ("receivers", "processors", "exporters"):
            for comp in p.get(section) or []:
                if comp not in (cfg.get(section) or {}):
                    fail(f"otel-collector: pipeline {pname} uses undefined {section[:-1]} {comp}")
    http = (((cfg.get("receivers") or {}).get("otlp") or {}).get("protocols") or {}).get("http") or {}
    if not str(http.get("endpoint", "")).endswith(":4318"):
        fail("otel-collector: the OTLP receiver must listen for HTTP on :4318")
    trace_exporters = (pipelines.get("traces") or {}).get("exporters") or []
    if not any(
        str(((cfg.get("exporters") or {}).get(e) or {}).get("endpoint", "")).startswith("jaeger:")
        for e in trace_exporters
    ):
        fail("otel-collector: traces are not exported to the jaeger service")


def check_dockerfile():
    text = (ROOT / "Dockerfile").read_text()
    lines = [l.strip() for l in text.splitlines() if l.strip() and not l.strip().startswith("#")]
    froms = [l for l in lines if l.upper().startswith("FROM ")]
    if len(froms) < 2 or " AS " not in froms[0].upper():
        fail("Dockerfile: expected a multi-stage build (FROM ... AS build, then a runtime stage)")
    if "--locked" not in text:
        fail("Dockerfile: cargo build must use --locked")
    users = [l.split(None, 1)[1] for l in lines if l.upper().startswith("USER ")]
    if not users or users[-1].split(":")[0] in ("root", "0"):
        fail("Dockerfile: the runtime stage must switch to a non-root USER")
    if not any(l.upper().startswith("HEALTHCHECK ") for l in lines):
        fail("Dockerfile: no HEALTHCHECK")
    ep = [l for l in lines if l.upper().startswith("ENTRYPOINT ")]
    if not ep or "pinfold" not in ep[-1]:
        fail("Dockerfile: ENTRYPOINT must run pinfold")
    cmd = [l for l in lines if l.upper().startswith("CMD ")]
    if not cmd or "serve" not in cmd[-1]:
        fail("Dockerfile: CMD must default to serve")
    ignore = (ROOT / ".dockerignore").read_text().split()
    if "target" not in ignore and "/target" not in ignore:
        fail(".dockerignore: target/ must be excluded")


def docker_compose_config():
    if not shutil.which("docker"):
        print("  docker client not found: skipping `docker compose config`")
        return
    probe = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True)
    if probe.returncode != 0:
        print("  this docker client has no compose plugin: skipping `docker compose config`")
        return
    r = subprocess.run(
        ["docker", "compose", "-f", str(ROOT / "docker-compose.yml"), "config", "--quiet"],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        fail(f"docker compose config: {r.stderr.strip()}")
    else:
        print("  docker compose config: ok")


def main():
    check_compose()
    check_collector()
    check_dockerfile()
    docker_compose_config()
    if errors:
        for e in errors:
            print(f"  FAIL {e}", file=sys.stderr)
        sys.exit(1)
    print("  docker-compose.yml, deploy/otel-collector.yaml, Dockerfile: structure ok")


if __name__ == "__main__":
    main()
