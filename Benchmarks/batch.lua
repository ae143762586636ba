-- wrk script for durable event writes as batches: each request is a POST /v1/batch of
-- `BENCH_BATCH` events, round-robin over `BENCH_INSTANCES` instances (bench-0 ...),
-- alternating the two events events.lua posts (valid in foreground in any order), so every
-- item is applied.
local instances = tonumber(os.getenv("BENCH_INSTANCES") or "64")
local size = tonumber(os.getenv("BENCH_BATCH") or "100")
local events = { "willResignActive", "didBecomeActive" }
local counter = 0

local headers = {}
for name, value in pairs(wrk.headers) do headers[name] = value end
headers["Content-Type"] = "application/json"

-- A few bodies made once: building 1,000 items per request would cost wrk more than the server.
local bodies = {}
for b = 1, 8 do
  local items = {}
  for i = 1, size do
    local n = (b - 1) * size + i
    items[i] = '{"instance":"bench-' .. (n % instances) .. '","kind":"event","body":{"event":"' .. events[(math.floor(n / instances) % 2) + 1] .. '"}}'
  end
  bodies[b] = '{"items":[' .. table.concat(items, ",") .. ']}'
end

function request()
  counter = counter + 1
  return wrk.format("POST", "/v1/batch", headers, bodies[(counter % #bodies) + 1])
end
