-- wrk script for batch ingest as devices flush their queues: each request is a
-- POST /v1/batch of BENCH_BATCH items (a multiple of 5): for each of BENCH_BATCH / 5 new
-- instances, its create and a cold start's four events (didFinishLaunching,
-- willConnectToWindow, didBecomeActive, willResignActive), every item with an idempotency
-- key of its own, as LifecycleReporter sends them. Ids and keys are new in every request
-- (BENCH_RUN, the thread's number and a counter replace "@" in one body made once; the
-- caller gives each wrk run its own BENCH_RUN, or its keys would be replays), so every item
-- is applied and stored. A response with an item refused counts as an error (`done` prints it).
local size = tonumber(os.getenv("BENCH_BATCH") or "1000")
local run = os.getenv("BENCH_RUN") or "0"
local counter = 0
refused = 0  -- a global: done() reads it from each thread
local threads = {}

local headers = {}
for name, value in pairs(wrk.headers) do headers[name] = value end
headers["Content-Type"] = "application/json"

local template
do
  local items = {}
  for i = 1, size / 5 do
    local id = "ingest-@-" .. i
    items[#items + 1] = '{"instance":"' .. id .. '","kind":"create","idempotencyKey":"' .. id .. '-c"}'
    items[#items + 1] = '{"instance":"' .. id .. '","kind":"event","body":{"event":"didFinishLaunching"},"idempotencyKey":"' .. id .. '-1"}'
    items[#items + 1] = '{"instance":"' .. id .. '","kind":"event","body":{"event":"willConnectToWindow","window":"main"},"idempotencyKey":"' .. id .. '-2"}'
    items[#items + 1] = '{"instance":"' .. id .. '","kind":"event","body":{"event":"didBecomeActive"},"idempotencyKey":"' .. id .. '-3"}'
    items[#items + 1] = '{"instance":"' .. id .. '","kind":"event","body":{"event":"willResignActive"},"idempotencyKey":"' .. id .. '-4"}'
  end
  template = '{"items":[' .. table.concat(items, ",") .. ']}'
end

-- A global, as the thread's own number (set in setup) must be: thread:set sets globals.
thread_number = 0
local threads_made = 0
function setup(thread)
  threads_made = threads_made + 1
  thread:set("thread_number", threads_made)
  table.insert(threads, thread)
end

function request()
  counter = counter + 1
  local prefix = run .. "x" .. tostring(thread_number) .. "x" .. tostring(counter)
  return wrk.format("POST", "/v1/batch", headers, (template:gsub("@", prefix)))
end

function response(status, _, body)
  if status ~= 200 or body:find('"status":[45]') then refused = refused + 1 end
end

function done()
  local total = 0
  for _, thread in ipairs(threads) do total = total + thread:get("refused") end
  io.write("refused batches: " .. total .. "\n")
end
