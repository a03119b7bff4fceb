-- wrk script: POST the same resolve call on every request, so every request
-- after the first is a resolve-cache hit. Used against Pinfold's
-- /v1/tenants/{t}/sessions/{id}/resolve and the bare baseline's /resolve
-- (which is pre-filled for exactly these arguments); the Authorization
-- header, when needed, comes from wrk's -H.
wrk.method = "POST"
wrk.body = os.getenv("RESOLVE_BODY")
  or '{"name":"manage_files","arguments":{"path":"/tmp/notes.txt","action":"read"}}'
wrk.headers["Content-Type"] = "application/json"
