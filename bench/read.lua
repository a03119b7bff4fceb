-- wrk script: GET version records in rotation over READ_COUNT distinct
-- versions 1.0.1 .. 1.0.READ_COUNT (published by bench/publish-reads.py),
-- without If-None-Match: every request is a 200 that reads the version and
-- its reviews from the database (no in-process cache answers it).
local token = os.getenv("TOKEN")
local base = os.getenv("READ_PATH") or "/v1/tenants/dev/servers/io.github.bench%2Freads/versions/"
local count = tonumber(os.getenv("READ_COUNT") or "1000")
local n = 0

request = function()
  n = n % count + 1
  return wrk.format("GET", base .. "1.0." .. n, { ["Authorization"] = "Bearer " .. token })
end
