-- wrk script for durable event writes: requests go round-robin over `BENCH_INSTANCES`
-- instances (bench-0 ...), alternating two events that are valid in foreground
-- (willResignActive, didBecomeActive), so every request is accepted in any order.
local instances = tonumber(os.getenv("BENCH_INSTANCES") or "64")
local counter = 0

local bodies = {
  '{"event":"willResignActive"}',
  '{"event":"didBecomeActive"}',
}

-- The headers given with -H (an Authorization, say) are kept: headers passed to
-- wrk.format replace them otherwise.
local headers = {}
for name, value in pairs(wrk.headers) do headers[name] = value end
headers["Content-Type"] = "application/json"

function request()
  counter = counter + 1
  local id = counter % instances
  local body = bodies[(math.floor(counter / instances) % 2) + 1]
  return wrk.format("POST", "/v1/instances/bench-" .. id .. "/events", headers, body)
end
