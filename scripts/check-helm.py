#!/usr/bin/env python3
"""Lint, render and validate the Helm chart offline.

For each value set in helm/pinfold/ci/*-values.yaml (default, split roles with
HPA, minimal): `helm lint --strict` and `helm template` through the PyPI
package helm-python-sdk (Helm's Go SDK, no `helm` binary), validation of
every rendered object against the Kubernetes JSON schemas with
kubernetes-validate (strict: unknown fields fail), and the chart's own
rules: probes on /healthz and /readyz, non-root and read-only containers,
the migration Job as a pre-install/pre-upgrade hook running `pinfold migrate`,
secrets referenced (never literal env values, never rendered from the chart's
defaults), consistent selectors, the expected objects per value set, and a
pinfold.toml that parses and carries the values' issuers and claim rules.
The Ingress is checked against the API itself: every path of
openapi/openapi.json (and the paths resolve and scope will serve) must reach
the Deployment whose `--services` serves it, under the controller's path
semantics (Kubernetes prefixes; ingress-nginx regular expressions, longest
first), and the operational routes must not be exposed.
A few bad value sets must fail to render.

Usage: python3 scripts/check-helm.py [REPO_ROOT]
Needs: pip install helm-python-sdk kubernetes-validate pyyaml
"""

import json
import pathlib
import re
import sys
import tomllib

import helm_python as helm
import kubernetes_validate
import yaml

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
CHART = ROOT / "helm" / "pinfold"
KUBE_VERSION = "1.30.0"
# Kinds whose schemas are not in kubernetes-validate (CRDs); checked by hand.
CRD_KINDS = {"ServiceMonitor"}
SECRET_ENV = {"PINFOLD_DATABASE_URL", "PINFOLD_DATABASE_OWNER_URL", "PINFOLD_ENCRYPTION_KEY",
              "PINFOLD_ENCRYPTION_KEYS_OLD"}

# value set -> expected object counts by kind (None: not checked)
EXPECT = {
    "default": {"Deployment": 1, "Service": 1, "HorizontalPodAutoscaler": 0,
                "PodDisruptionBudget": 1, "Job": 1, "Secret": 0, "ServiceMonitor": 0,
                "Ingress": 0},
    "split-hpa": {"Deployment": 4, "Service": 4, "HorizontalPodAutoscaler": 4,
                  "PodDisruptionBudget": 4, "Job": 1, "Secret": 0, "ServiceMonitor": 1,
                  "Ingress": 1},
    "minimal": {"Deployment": 1, "Service": 1, "HorizontalPodAutoscaler": 0,
                "PodDisruptionBudget": 0, "Job": 1, "Secret": 1, "ServiceMonitor": 0,
                "Ingress": 1},
}
# The services of `pinfold serve --services` (services/server/src/services.rs).
SERVICES = ["tenancy", "registry", "resolve", "scope"]
# OpenAPI tag -> the service whose router serves the tagged operations. A new
# tag fails the check until it is mapped here (and routed by the Ingress).
TAG_SERVICE = {"tenants": "tenancy", "registry": "registry", "subregistry": "registry",
               "resolve": "resolve", "scope": "scope"}
# Operational routes: every process serves them; the Ingress must not expose them,
# except those clients must reach (PUBLIC_OPERATIONAL: any role may answer).
OPERATIONAL = {"operations"}
# RFC 9728 protected-resource metadata: MCP-aware clients discover how to
# authenticate to Pinfold there, from the resource_metadata of a 401.
PUBLIC_OPERATIONAL = {"/.well-known/oauth-protected-resource"}
# Paths of services that have no routes yet, and the service that will serve them.
PLANNED = {
    "/docs/": "tenancy",
    "/openapi.json": "tenancy",
}
# Value sets that must be refused at render time, and a word the error must contain.
MUST_FAIL = [
    ({"mode": "sideways"}, "mode"),
    ({"secrets": {"create": True}}, "databaseUrl"),
    ({"secrets": {"create": True, "existingSecret": "x", "databaseUrl": "postgres://a@b/c",
                  "encryptionKey": "k"}}, "exclusive"),
    ({"auth": {"issuers": [{"issuer": "https://token.actions.githubusercontent.com", "audience": "a",
                            "algorithms": ["RS256"], "jwksUrl": "https://x/jwks",
                            "rules": [{"match": {"repository_id": 123}, "tenant": "acme",
                                       "roles": ["publisher"]}]}]}}, "must be a string"),
]

errors = []


def fail(where, msg):
    errors.append(f"{where}: {msg}")


def strings(v):
    """Every non-empty string leaf of a values tree."""
    if isinstance(v, dict):
        for x in v.values():
            yield from strings(x)
    elif isinstance(v, list):
        for x in v:
            yield from strings(x)
    elif isinstance(v, str) and v:
        yield v


def render(values):
    chart = helm.Chart.load(str(CHART))
    out = chart.render(values, name="pinfold", namespace="pinfold", is_install=True)
    docs = []
    for path, text in sorted(out.items()):
        if path.endswith("NOTES.txt"):
            continue
        for d in yaml.safe_load_all(text):
            if d:
                docs.append((path, d))
    return docs


def pod_labels(dep):
    return dep["spec"]["template"]["metadata"].get("labels", {})


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def check_pod(where, spec, is_job):
    psc = spec.get("securityContext") or {}
    if psc.get("runAsNonRoot") is not True or psc.get("runAsUser", 0) == 0:
        fail(where, "pod must run as a non-root user (runAsNonRoot, runAsUser != 0)")
    if spec.get("automountServiceAccountToken") is not False:
        fail(where, "automountServiceAccountToken must be false (Pinfold never calls the API server)")
    for c in spec.get("containers", []):
        cw = f"{where}/{c['name']}"
        sc = c.get("securityContext") or {}
        if sc.get("allowPrivilegeEscalation") is not False:
            fail(cw, "allowPrivilegeEscalation must be false")
        if sc.get("readOnlyRootFilesystem") is not True:
            fail(cw, "readOnlyRootFilesystem must be true")
        if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
            fail(cw, "capabilities must drop ALL")
        if not (c.get("resources") or {}).get("requests"):
            fail(cw, "resource requests missing")
        if (c.get("resources") or {}).get("limits", {}).get("memory") is None:
            fail(cw, "memory limit missing")
        for e in c.get("env", []):
            if e["name"] in SECRET_ENV and ("value" in e or "secretKeyRef" not in e.get("valueFrom", {})):
                fail(cw, f"{e['name']} must come from a Secret (secretKeyRef), never a literal")
        if is_job:
            continue
        lp = ((c.get("livenessProbe") or {}).get("httpGet") or {}).get("path")
        rp = ((c.get("readinessProbe") or {}).get("httpGet") or {}).get("path")
        if lp != "/healthz":
            fail(cw, f"liveness probe must GET /healthz (got {lp})")
        if rp != "/readyz":
            fail(cw, f"readiness probe must GET /readyz (got {rp})")
        if c.get("args", [None])[0] != "serve":
            fail(cw, "must run `pinfold serve`")


def api_paths():
    """(concrete path, service or None for operational) for every documented path."""
    doc = json.loads((ROOT / "openapi" / "openapi.json").read_text())
    out = []
    for template, item in doc["paths"].items():
        tags = {t for op in item.values() if isinstance(op, dict) for t in op.get("tags", [])}
        concrete = re.sub(r"\{tenant\}", "acme", template)
        concrete = re.sub(r"\{[^}]+\}", "x", concrete)
        if tags <= OPERATIONAL:
            out.append((concrete, "*" if template in PUBLIC_OPERATIONAL else None))
            continue
        services = {TAG_SERVICE.get(t) for t in tags - OPERATIONAL}
        if None in services or len(services) != 1:
            fail("openapi.json", f"{template}: tags {sorted(tags)} name no single service; "
                 "map them in TAG_SERVICE (scripts/check-helm.py) and route them in the chart")
            continue
        out.append((concrete, services.pop()))
    return out


def ingress_backend(ing, path):
    """The Service an Ingress sends `path` to, or None."""
    ann = ing["metadata"].get("annotations") or {}
    regex = ann.get("nginx.ingress.kubernetes.io/use-regex") == "true"
    candidates = []
    for rule in ing["spec"]["rules"]:
        for p in rule["http"]["paths"]:
            pt, pp = p["pathType"], p["path"]
            if pt == "ImplementationSpecific":
                if not regex:
                    return None
                # ingress-nginx: case-insensitive, anchored at the start, longer paths first.
                hit = re.match(pp, path, re.IGNORECASE) is not None
            elif pt == "Exact":
                hit = path == pp
            else:  # Prefix: whole path elements
                base = pp.rstrip("/")
                hit = path == base or path.startswith(base + "/") or pp == "/"
            if hit:
                candidates.append((len(pp), p["backend"]["service"]["name"]))
    if not candidates:
        return None
    return max(candidates, key=lambda c: c[0])[1]


def check_ingress(where, ing, deployments, services):
    """Every API path reaches a Deployment serving it; operational paths stay inside."""
    iw = f"{where} Ingress/{ing['metadata']['name']}"
    svc_by_name = {s["metadata"]["name"]: s for s in services}
    served_by = {}  # Service name -> set of services its pods run
    for svc in services:
        sel = svc["spec"].get("selector") or {}
        for d in deployments:
            if selects(sel, pod_labels(d)):
                args = d["spec"]["template"]["spec"]["containers"][0]["args"]
                served_by.setdefault(svc["metadata"]["name"], set()).update(
                    args[args.index("--services") + 1].split(","))
    for rule in ing["spec"]["rules"]:
        for p in rule["http"]["paths"]:
            b = p["backend"]["service"]
            if b["name"] not in svc_by_name:
                fail(iw, f"path {p['path']} goes to Service {b['name']}, which is not rendered")
            elif b.get("port", {}).get("name") != "http":
                fail(iw, f"path {p['path']} must use the Service's port named http")
    checks = api_paths() + list(PLANNED.items())
    for path, service in checks:
        backend = ingress_backend(ing, path)
        if service is None:
            if backend is not None:
                fail(iw, f"{path} (operational) must not be exposed, goes to {backend}")
            continue
        if service == "*":
            if backend is None:
                fail(iw, f"{path} must be exposed (clients discover it), reaches no Service")
            continue
        if backend is None:
            fail(iw, f"{path} reaches no Service (should reach {service})")
        elif service not in served_by.get(backend, set()):
            fail(iw, f"{path} goes to {backend}, whose pods serve "
                 f"{sorted(served_by.get(backend, set()))}, not {service}")
    return len(checks)


def check_set(name, values, defaults):
    where = f"[{name}]"
    report = helm.lint(str(CHART), values, strict=True, namespace="pinfold",
                       kube_version=f"v{KUBE_VERSION}")
    for m in report.get("messages", []):
        if m.get("severity", 0) >= 2:
            fail(where, f"helm lint: {m.get('path')}: {m.get('error')}")
    for e in report.get("errors", []):
        fail(where, f"helm lint: {e}")
    docs = render(values)
    by_kind = {}
    for path, d in docs:
        by_kind.setdefault(d.get("kind"), []).append(d)
        ow = f"{where} {d.get('kind')}/{d.get('metadata', {}).get('name')}"
        if d.get("kind") in CRD_KINDS:
            if d.get("apiVersion") != "monitoring.coreos.com/v1" or not d["spec"].get("endpoints"):
                fail(ow, "malformed ServiceMonitor")
            continue
        try:
            kubernetes_validate.validate(d, KUBE_VERSION, strict=True)
        except kubernetes_validate.ValidationError as e:
            fail(ow, f"schema: {e.message} at {'/'.join(str(p) for p in e.path)}")
        except Exception as e:  # unknown kind/version and the like
            fail(ow, f"schema: {e}")
    for kind, n in EXPECT[name].items():
        got = len(by_kind.get(kind, []))
        if got != n:
            fail(where, f"expected {n} {kind}, rendered {got}")

    deployments = by_kind.get("Deployment", [])
    roles = set()
    for dep in deployments:
        dw = f"{where} Deployment/{dep['metadata']['name']}"
        spec = dep["spec"]["template"]["spec"]
        check_pod(dw, spec, is_job=False)
        if not selects(dep["spec"]["selector"]["matchLabels"], pod_labels(dep)):
            fail(dw, "selector does not match the pod labels")
        args = spec["containers"][0]["args"]
        if "--services" in args:
            roles.add(args[args.index("--services") + 1])
    want_roles = set(SERVICES) if values.get("mode") == "split" else {",".join(SERVICES)}
    if roles != want_roles:
        fail(where, f"--services per Deployment: {sorted(roles)}, expected {sorted(want_roles)}")

    jobs = by_kind.get("Job", [])
    for job in jobs:
        jw = f"{where} Job/{job['metadata']['name']}"
        ann = job["metadata"].get("annotations") or {}
        hooks = set(ann.get("helm.sh/hook", "").split(","))
        if not {"pre-install", "pre-upgrade"} <= hooks:
            fail(jw, "must be a pre-install,pre-upgrade hook")
        if "before-hook-creation" not in ann.get("helm.sh/hook-delete-policy", ""):
            fail(jw, "hook-delete-policy must include before-hook-creation")
        spec = job["spec"]["template"]["spec"]
        check_pod(jw, spec, is_job=True)
        if spec["containers"][0].get("args") != ["migrate"]:
            fail(jw, "must run `pinfold migrate`")
        if spec.get("restartPolicy") not in ("Never", "OnFailure"):
            fail(jw, "restartPolicy must be Never or OnFailure")

    for svc in by_kind.get("Service", []):
        sel = svc["spec"].get("selector") or {}
        if not any(selects(sel, pod_labels(d)) for d in deployments):
            fail(f"{where} Service/{svc['metadata']['name']}", "selects no Deployment's pods")
        for p in svc["spec"]["ports"]:
            if p.get("targetPort") != "http":
                fail(f"{where} Service/{svc['metadata']['name']}", "targetPort must be the named port http")
    for pdb in by_kind.get("PodDisruptionBudget", []):
        sel = pdb["spec"]["selector"]["matchLabels"]
        if not any(selects(sel, pod_labels(d)) for d in deployments):
            fail(f"{where} PDB/{pdb['metadata']['name']}", "selects no Deployment's pods")
    dep_names = {d["metadata"]["name"] for d in deployments}
    for hpa in by_kind.get("HorizontalPodAutoscaler", []):
        if hpa["spec"]["scaleTargetRef"]["name"] not in dep_names:
            fail(f"{where} HPA/{hpa['metadata']['name']}", "targets no rendered Deployment")
        if hpa["spec"]["minReplicas"] > hpa["spec"]["maxReplicas"]:
            fail(f"{where} HPA/{hpa['metadata']['name']}", "minReplicas > maxReplicas")
    for dep in deployments:
        if any(h["spec"]["scaleTargetRef"]["name"] == dep["metadata"]["name"]
               for h in by_kind.get("HorizontalPodAutoscaler", [])) and "replicas" in dep["spec"]:
            fail(f"{where} Deployment/{dep['metadata']['name']}", "sets replicas although an HPA owns them")

    # Secrets: only from the value set, never from the chart's defaults.
    default_strings = set(strings(defaults))
    for sec in by_kind.get("Secret", []):
        sw = f"{where} Secret/{sec['metadata']['name']}"
        data = dict(sec.get("stringData") or {})
        data.update(sec.get("data") or {})
        for k, v in data.items():
            if not v:
                fail(sw, f"{k} is empty")
            if v in default_strings:
                fail(sw, f"{k} comes from the chart's default values")
        if "pre-install" not in (sec["metadata"].get("annotations") or {}).get("helm.sh/hook", ""):
            fail(sw, "a chart-made Secret must exist before the migration hook (pre-install hook)")
    for cm in by_kind.get("ConfigMap", []):
        check_config(f"{where} ConfigMap/{cm['metadata']['name']}", cm, values, defaults)
        text = yaml.safe_dump(cm.get("data") or {})
        for word in ("postgres://", "postgresql://", "hs256_secret", "encryption_key"):
            if word in text:
                fail(f"{where} ConfigMap/{cm['metadata']['name']}", f"contains {word!r}: secrets belong in the Secret")
    routed = 0
    for ing in by_kind.get("Ingress", []):
        routed += check_ingress(where, ing, deployments, by_kind.get("Service", []))
    extra = f"; Ingress routes {routed} paths to the right role" if routed else ""
    print(f"  {name}: {len(docs)} objects rendered, validated against Kubernetes {KUBE_VERSION}{extra}")


def check_config(where, cm, values, defaults):
    """pinfold.toml parses as TOML and carries the issuers of the values,
    their claim rules included, unchanged."""
    text = (cm.get("data") or {}).get("pinfold.toml")
    if text is None:
        return
    try:
        cfg = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        fail(where, f"pinfold.toml is not TOML: {e}")
        return
    rl = {**(defaults.get("rateLimits") or {}), **(values.get("rateLimits") or {})}
    got_rl = cfg.get("rate_limits") or {}
    if got_rl.get("enabled") != rl.get("enabled") or got_rl.get("max_buckets") != rl.get("maxBuckets"):
        fail(where, f"rate_limits: {got_rl!r}, values say {rl!r}")
    for cls, lim in (rl.get("classes") or {}).items():
        g = got_rl.get(cls) or {}
        for key, wkey in [("tenant_rate", "tenantRate"), ("tenant_burst", "tenantBurst"),
                          ("principal_rate", "principalRate"), ("principal_burst", "principalBurst")]:
            if g.get(key) != lim.get(wkey):
                fail(where, f"rate_limits.{cls}.{key}: {g.get(key)!r}, values say {lim.get(wkey)!r}")
    conn = {**(defaults.get("connections") or {}), **(values.get("connections") or {})}
    got_conn = cfg.get("connections") or {}
    if (got_conn.get("header_read_timeout_secs"), got_conn.get("max_connections")) != (
            conn.get("headerReadTimeoutSecs"), conn.get("maxConnections")):
        fail(where, f"connections: {got_conn!r}, values say {conn!r}")
    want = (values.get("auth") or {}).get("issuers", (defaults.get("auth") or {}).get("issuers")) or []
    got = (cfg.get("auth") or {}).get("issuers") or []
    if len(got) != len(want):
        fail(where, f"pinfold.toml has {len(got)} issuers, the values {len(want)}")
        return
    for i, (g, w) in enumerate(zip(got, want)):
        for key, wkey in [("issuer", "issuer"), ("audience", "audience"), ("algorithms", "algorithms"),
                          ("jwks_url", "jwksUrl"), ("public_key_file", "publicKeyFile")]:
            if g.get(key) != w.get(wkey):
                fail(where, f"auth.issuers[{i}].{key}: {g.get(key)!r}, values say {w.get(wkey)!r}")
        wrules = [{"match": r.get("match"), "tenant": r.get("tenant"), "roles": r.get("roles")}
                  for r in w.get("rules") or []]
        if (g.get("rules") or []) != wrules:
            fail(where, f"auth.issuers[{i}].rules: {g.get('rules')!r}, values say {wrules!r}")


def main():
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    if any(v for v in (defaults.get("secrets") or {}).values() if isinstance(v, str) and "://" in v):
        fail("values.yaml", "a default secret value is set")
    sets = sorted((CHART / "ci").glob("*-values.yaml"))
    names = [p.name[: -len("-values.yaml")] for p in sets]
    if sorted(names) != sorted(EXPECT):
        fail("helm/pinfold/ci", f"value sets {names}, expected {sorted(EXPECT)}")
    for p, name in zip(sets, names):
        if name not in EXPECT:
            continue
        try:
            check_set(name, yaml.safe_load(p.read_text()) or {}, defaults)
        except helm.HelmError as e:
            fail(f"[{name}]", f"render failed: {e}")
    for values, word in MUST_FAIL:
        try:
            render(values)
            fail("bad values", f"{values} rendered but must be refused")
        except helm.HelmError as e:
            if word not in str(e):
                fail("bad values", f"{values} refused for the wrong reason: {e}")
    if errors:
        for e in errors:
            print(f"  FAIL {e}", file=sys.stderr)
        sys.exit(1)
    print(f"  helm/pinfold: lint, render and schema validation ok ({len(sets)} value sets, "
          f"{len(MUST_FAIL)} bad value sets refused; Helm SDK {helm.helm_sdk_version()})")


if __name__ == "__main__":
    main()
