-- wrk script: PUT distinct ≤ 64 KiB signatures (one new version per request).
-- The template holds "__VERSION__" where the version goes (path and body).
local template = io.open(os.getenv("TEMPLATE") or "bench/publish-template.json"):read("*a")
local prefix, suffix = template:match("^(.-)__VERSION__(.*)$")
local token = os.getenv("TOKEN")
local base = os.getenv("PUBLISH_PATH") or "/v1/tenants/dev/servers/io.github.bench%2Frecords/versions/"
local run = os.getenv("RUN_ID") or "0"
local n = 0

request = function()
  n = n + 1
  local version = "1." .. run .. "." .. n
  local body = prefix .. version .. suffix
  return wrk.format("PUT", base .. version, {
    ["Authorization"] = "Bearer " .. token,
    ["Content-Type"] = "application/json",
  }, body)
end

