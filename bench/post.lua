-- wrk: POST the bytes of $BODY_FILE with the headers in $HEADERS (one
-- "Name: value" per line). Used by bench/guard.sh.
local f = assert(io.open(os.getenv("BODY_FILE"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
for line in (os.getenv("HEADERS") or ""):gmatch("[^\n]+") do
  local name, value = line:match("^([^:]+):%s*(.*)$")
  if name then wrk.headers[name] = value end
end
