-- wrk script: nearby geofence search at the points of WM_QUERIES (a file of "lat,lng" lines,
-- written by examples/geofence_bench.rs --export), radius WM_RADIUS meters; each thread walks the
-- list from its own offset. WM_KEY is the secret API key.
local key = os.getenv("WM_KEY")
local radius = os.getenv("WM_RADIUS") or "1000"
local file = os.getenv("WM_QUERIES")
local threads = {}
local n = 0

function setup(thread)
  n = n + 1
  thread:set("tid", n)
  table.insert(threads, thread)
end

function init(args)
  points = {}
  for line in io.lines(file) do
    points[#points + 1] = line
  end
  i = (tid * 997) % #points
  errors = 0
end

request = function()
  i = i % #points + 1
  return wrk.format("GET", "/v1/api/search/geofences/?location=" .. points[i] .. "&radius=" .. radius,
    {["Api-Key"] = key})
end

response = function(status, headers, body)
  if status ~= 200 then
    errors = errors + 1
    if errors <= 3 then io.stderr:write("unexpected status " .. status .. ": " .. body .. "\n") end
  end
end

done = function(summary, latency, requests)
  io.write(string.format(
    'JSON {"requests":%d,"seconds":%.3f,"requests_per_s":%.1f,"p50_ms":%.3f,"p99_ms":%.3f,"max_ms":%.3f,"non_2xx":%d,"socket_errors":%d}\n',
    summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000,
    summary.errors.status, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
