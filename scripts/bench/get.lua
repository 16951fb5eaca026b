-- wrk script: list users (page 1) with the key from WM_KEY.
wrk.headers["Api-Key"] = os.getenv("WM_KEY")
-- The first unexpected answer of each thread is shown; wrk counts the rest.
response = function(status, headers, body)
  if status ~= 200 and not told then
    told = true
    io.stderr:write("unexpected status " .. status .. "\n")
  end
end
