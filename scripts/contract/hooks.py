"""schemathesis hooks for scripts/contract-check.sh.

An attestation is a compact JWS served as `application/jwt` (RFC 7519
section 10.3.1): three base64url parts joined by dots, not JSON. The
document describes it as a string, so its text is what schema validation
sees. schemathesis 4.32.5 counts `application/jwt` among the JSON media
types and tries its JSON deserializer first, so ours is moved ahead of it
(the version is pinned in contract-check.sh).

schemathesis 4.32.5 also reads every string of a JSON response that starts
with `http://` or `https://` as a URL to learn links from, with Python's
`urlsplit`, which raises on some strings a server may rightly echo (a card's
`websiteUrl` such as `http://[x`, which the card rules accept): the run then
stops with an internal error. Such a string is no link to follow, so it is
skipped. This changes no check and no expected status.
"""

import schemathesis
from schemathesis.core import deserialization
from schemathesis.engine import observations


@schemathesis.deserializer("application/jwt")
def deserialize_jwt(_ctx, response):
    # Every JSON-family type reaches the first deserializer of the family:
    # hand anything that is not a JWT to the JSON one.
    content_type = (response.headers.get("content-type") or [""])[0]
    if not content_type.lower().startswith("application/jwt"):
        return response.json()
    text = response.content.decode("ascii")
    if text.count(".") != 2:
        raise ValueError(f"not a compact JWS: {text[:40]!r}")
    return text


_ours = deserialization._DESERIALIZERS.pop("application/jwt")
deserialization._DESERIALIZERS = {"application/jwt": _ours, **deserialization._DESERIALIZERS}


_same_origin_path = observations._same_origin_path


def _same_origin_path_or_none(value, origin):
    try:
        return _same_origin_path(value, origin)
    except ValueError:
        return None


observations._same_origin_path = _same_origin_path_or_none
