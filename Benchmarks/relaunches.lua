-- wrk script for the WAL benchmark: durable relaunches (`POST /v1/instances/{id}/relaunches`,
-- no body), round-robin over `BENCH_INSTANCES` instances (wal-0 ...). A relaunch is valid
-- in every state, so every request writes a record.
local instances = tonumber(os.getenv("BENCH_INSTANCES") or "32")
local counter = 0

function request()
  counter = counter + 1
  return wrk.format("POST", "/v1/instances/wal-" .. (counter % instances) .. "/relaunches")
end
