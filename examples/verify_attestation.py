#!/usr/bin/env python3
"""Verify a Pinfold attestation offline with a stock JWT library (PyJWT).

    pip install "pyjwt[crypto]"
    python3 examples/verify_attestation.py attestation.jwt jwks.json sha256:<expected digest>

Exits 0 when the attestation is signed by a key in the tenant's JWKS, names the
expected digest and says the version is approved; prints the claims.
"""
import json
import sys

import jwt

token, jwks_file, expected_digest = sys.argv[1], sys.argv[2], sys.argv[3]
with open(token) as f:
    compact = f.read().strip()
with open(jwks_file) as f:
    jwks = jwt.PyJWKSet.from_dict(json.load(f))

kid = jwt.get_unverified_header(compact)["kid"]
key = next(k for k in jwks.keys if k.key_id == kid)
claims = jwt.decode(compact, key=key.key, algorithms=["EdDSA"], options={"require": ["iat"]})

print(json.dumps(claims, indent=2))
if claims["digest"] != expected_digest:
    sys.exit(f"digest mismatch: attested {claims['digest']}, expected {expected_digest}")
if claims["status"] != "approved":
    sys.exit(f"version is {claims['status']}, not approved")
print("attestation verified")
