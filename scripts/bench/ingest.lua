-- wrk script: each request ingests 100 new locations (unique recorded_at per thread and request),
-- so every request writes; WM_KEY and WM_USER come from the environment.
local key = os.getenv("WM_KEY")
local user = os.getenv("WM_USER")
local threads = {}
local n = 0

function setup(thread)
  n = n + 1
  thread:set("tid", n)
  table.insert(threads, thread)
end

function init(args)
  counter = 0
end

request = function()
  counter = counter + 1
  -- Seconds since 2020 for this batch: threads and requests never overlap, and every batch is in
  -- the past (the server refuses fixes from the future).
  local base = 1577836800 + ((tid - 1) * 1000000 + counter) * 100
  local locs = {}
  for i = 0, 99 do
    local t = base + i
    locs[#locs + 1] = string.format(
      '{"coordinates":[%.6f,%.6f],"recorded_at":"%s.000","speed":%.1f,"accuracy":5}',
      13.4 + (i % 50) * 0.0001, 52.5 + counter * 0.00001, os.date("!%Y-%m-%dT%H:%M:%S", t), i % 20)
  end
  local body = '{"user_id":"' .. user .. '","locations":[' .. table.concat(locs, ",") .. ']}'
  return wrk.format("POST", "/v1/api/location/", {["Api-Key"] = key, ["Content-Type"] = "application/json"}, body)
end

-- The first unexpected answer of each thread is shown; wrk counts the rest.
response = function(status, headers, body)
  if status ~= 201 and status ~= 200 and not told then
    told = true
    io.stderr:write("unexpected status " .. status .. ": " .. body .. "\n")
  end
end
