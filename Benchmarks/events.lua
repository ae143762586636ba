-- wrk script for durable event writes: requests go round-robin over `BENCH_INSTANCES`
-- instances (bench-0 ...), alternating two events that are valid in foreground
-- (willResignActive, didBecomeActive), so every request is accepted in any order.
local instances = tonumber(os.getenv("BENCH_INSTANCES") or "64")
local counter = 0

local bodies = {
  '{"event":"willResignActive"}',
  '{"event":"didBecomeActive"}',
}

function request()
  counter = counter + 1
  local id = counter % instances
  local body = bodies[(math.floor(counter / instances) % 2) + 1]
  return wrk.format("POST", "/v1/instances/bench-" .. id .. "/events",
    {["Content-Type"] = "application/json"}, body)
end
