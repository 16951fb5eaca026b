-- wrk script: each thread drives one user (the tid-th id of the comma-separated WM_USERS) through
-- the box WM_BBOX ("min_lng,min_lat,max_lng,max_lat"): every request ingests the next 100 fixes,
-- one a second, 15 m apart (54 km/h), on a wandering heading that turns back at the box's edge.
-- Run with as many connections as threads (-tN -cN) so a user's batches arrive in order (a batch
-- older than the user's last evaluated fix is stored but not evaluated). WM_KEY is the API key.
local key = os.getenv("WM_KEY")
local users = {}
for u in string.gmatch(os.getenv("WM_USERS"), "[^,]+") do users[#users + 1] = u end
local box = {}
for v in string.gmatch(os.getenv("WM_BBOX"), "[^,]+") do box[#box + 1] = tonumber(v) end
local threads = {}
local n = 0

function setup(thread)
  n = n + 1
  thread:set("tid", n)
  table.insert(threads, thread)
end

function init(args)
  math.randomseed(tid * 7919)
  user = users[(tid - 1) % #users + 1]
  lng = box[1] + (box[3] - box[1]) * math.random()
  lat = box[2] + (box[4] - box[2]) * math.random()
  heading = 2 * math.pi * math.random()
  counter = 0
  errors = 0
end

request = function()
  counter = counter + 1
  -- Seconds since 2021 for this batch: increasing per user, never reused.
  local base = 1609459200 + counter * 100
  local mlat = 111320
  local mlng = 111320 * math.cos(math.rad(lat))
  local locs = {}
  for i = 0, 99 do
    heading = heading + (math.random() - 0.5) * 0.3
    local nlng = lng + 15 * math.sin(heading) / mlng
    local nlat = lat + 15 * math.cos(heading) / mlat
    if nlng < box[1] or nlng > box[3] or nlat < box[2] or nlat > box[4] then
      heading = heading + math.pi
    else
      lng, lat = nlng, nlat
    end
    locs[#locs + 1] = string.format(
      '{"coordinates":[%.7f,%.7f],"recorded_at":"%s.000","speed":15.0,"accuracy":5}',
      lng, lat, os.date("!%Y-%m-%dT%H:%M:%S", base + i))
  end
  local body = '{"user_id":"' .. user .. '","locations":[' .. table.concat(locs, ",") .. ']}'
  return wrk.format("POST", "/v1/api/location/", {["Api-Key"] = key, ["Content-Type"] = "application/json"}, body)
end

response = function(status, headers, body)
  if status < 200 or status >= 300 then
    errors = errors + 1
    if errors <= 3 then io.stderr:write("unexpected status " .. status .. ": " .. body .. "\n") end
  end
end

done = function(summary, latency, requests)
  local s = summary.duration / 1e6
  io.write(string.format(
    'JSON {"requests":%d,"seconds":%.3f,"requests_per_s":%.1f,"locations_per_s":%.0f,"p50_ms":%.3f,"p99_ms":%.3f,"max_ms":%.3f,"non_2xx":%d,"socket_errors":%d}\n',
    summary.requests, s, summary.requests / s, 100 * summary.requests / s,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000,
    summary.errors.status, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
