"""Drive Pinfold through a client generated from openapi/openapi.json.

The generated package (openapi-python-client) is imported from the directory
given as the first argument; the server's base URL and tokens come from the
environment (PINFOLD_URL, PINFOLD_TOKEN, PINFOLD_REVIEWER_TOKEN). Every call
goes through the generated operation functions and models, with
`raise_on_unexpected_status=True`, so a status the document does not list,
or a body its schema cannot parse, fails the run.

Flow: publish -> (read: pending) -> review (approve) -> read (approved, ETag,
304) -> card -> verify a conformant and a less-safe observation -> list.
"""

import copy
import json
import os
import sys
from http import HTTPStatus

sys.path.insert(0, sys.argv[1])
card_path = sys.argv[2]

from pinfold_client import AuthenticatedClient  # noqa: E402
from pinfold_client.api.registry import (  # noqa: E402
    get_card,
    get_version,
    list_servers,
    publish_version,
    review_version,
    verify_version,
)
from pinfold_client.models import (  # noqa: E402
    ProblemBody,
    PublishVersionBody,
    ReviewBody,
    VerifyBody,
    VersionRecord,
)
from pinfold_client.models.decision import Decision  # noqa: E402

BASE = os.environ["PINFOLD_URL"]
TENANT = os.environ.get("PINFOLD_TENANT", "dev")
SERVER = "io.github.acme/generated-client"
VERSION = "1.0.0"

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def client(token):
    return AuthenticatedClient(base_url=BASE, token=token, raise_on_unexpected_status=True)


publisher = client(os.environ["PINFOLD_TOKEN"])
reviewer = client(os.environ["PINFOLD_REVIEWER_TOKEN"])

with open(card_path) as f:
    card = json.load(f)
card["name"] = SERVER
card["version"] = VERSION

# Publish.
r = publish_version.sync_detailed(TENANT, SERVER, VERSION, client=publisher, body=PublishVersionBody.from_dict(card))
check(r.status_code == HTTPStatus.CREATED, f"publish answers 201 (got {r.status_code})")
check(isinstance(r.parsed, VersionRecord), "publish answer parses as VersionRecord")
published = r.parsed
check(published.status.value == "pending", f"a new version is pending (got {published.status})")
check(published.digest.startswith("sha256:"), "the digest is a sha256 digest")

# Publishing the same content again is idempotent (200, same digest).
r = publish_version.sync_detailed(TENANT, SERVER, VERSION, client=publisher, body=PublishVersionBody.from_dict(card))
check(r.status_code == HTTPStatus.OK, f"republishing identical content answers 200 (got {r.status_code})")
check(r.parsed.digest == published.digest, "republishing gives the same digest")

# Different content under the same version is a conflict, as a typed problem.
changed = copy.deepcopy(card)
changed["description"] = "something else"
r = publish_version.sync_detailed(TENANT, SERVER, VERSION, client=publisher, body=PublishVersionBody.from_dict(changed))
check(r.status_code == HTTPStatus.CONFLICT, f"different content under a published version answers 409 (got {r.status_code})")
check(isinstance(r.parsed, ProblemBody) and r.parsed.status == 409, "the conflict parses as a ProblemBody")

# The publisher cannot approve its own version.
r = review_version.sync_detailed(TENANT, SERVER, VERSION, client=publisher, body=ReviewBody(decision=Decision.APPROVE))
check(r.status_code == HTTPStatus.FORBIDDEN, f"self-approval answers 403 (got {r.status_code})")

# A reviewer approves it.
r = review_version.sync_detailed(
    TENANT, SERVER, VERSION, client=reviewer, body=ReviewBody(decision=Decision.APPROVE, note="checked by the generated client")
)
check(r.status_code == HTTPStatus.OK, f"review answers 200 (got {r.status_code})")
check(isinstance(r.parsed, VersionRecord) and r.parsed.status.value == "approved", "the reviewed version is approved")

# Read it back, then revalidate with its ETag.
r = get_version.sync_detailed(TENANT, SERVER, VERSION, client=publisher)
check(r.status_code == HTTPStatus.OK, f"read answers 200 (got {r.status_code})")
record = r.parsed
check(isinstance(record, VersionRecord), "the read parses as VersionRecord")
check(record.digest == published.digest, "the read digest equals the published digest")
check(record.approved_by is not None, "approved_by is set")
check(len(record.reviews) == 1 and record.reviews[0].decision.value == "approve", "the review is recorded")
etag = r.headers.get("etag")
check(bool(etag), "the read carries an ETag")
r = get_version.sync_detailed(TENANT, SERVER, VERSION, client=publisher, if_none_match=etag)
check(r.status_code == HTTPStatus.NOT_MODIFIED, f"If-None-Match answers 304 (got {r.status_code})")

r = get_card.sync_detailed(TENANT, SERVER, VERSION, client=publisher)
check(r.status_code == HTTPStatus.OK, f"card answers 200 (got {r.status_code})")
served = r.parsed.to_dict()
check(served.get("name") == SERVER and served.get("signature") == card["signature"], "the card round-trips")

# Verify: the declared tools conform; a read tool claiming to be destructive does not.
tools = copy.deepcopy(card["signature"]["tools"])
r = verify_version.sync_detailed(TENANT, SERVER, VERSION, client=publisher, body=VerifyBody.from_dict({"tools": tools}))
check(r.status_code == HTTPStatus.OK, f"verify answers 200 (got {r.status_code})")
report = r.parsed
check(report.conformant is True and report.violations == [], "the declared tools are conformant")

bad = copy.deepcopy(tools)
bad[0]["annotations"] = {"readOnlyHint": False, "destructiveHint": True}
r = verify_version.sync_detailed(
    TENANT, SERVER, VERSION, client=publisher, body=VerifyBody.from_dict({"tools": bad}), mode="strict"
)
check(r.status_code == HTTPStatus.OK, f"verify of a less-safe observation answers 200 (got {r.status_code})")
report = r.parsed
check(report.conformant is False and report.blocking is True, "a less-safe observation is blocking in strict mode")
check(
    any(v.kind.value == "annotation_not_declared" and v.less_safe for v in report.violations),
    "the violation is annotation_not_declared and less safe",
)

# A missing version is a typed 404 problem.
r = get_version.sync_detailed(TENANT, SERVER, "9.9.9", client=publisher)
check(r.status_code == HTTPStatus.NOT_FOUND and isinstance(r.parsed, ProblemBody), "an unknown version is a 404 problem")

# Listed.
r = list_servers.sync_detailed(TENANT, client=publisher, q="generated-client")
check(r.status_code == HTTPStatus.OK, f"list answers 200 (got {r.status_code})")
check(any(s.name == SERVER for s in r.parsed.items), "the server is listed")

if failures:
    print(f"\ngenerated client: {len(failures)} failure(s)")
    sys.exit(1)
print("\ngenerated client: publish -> review -> read -> verify all passed")
