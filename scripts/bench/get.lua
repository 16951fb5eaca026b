-- wrk script: list users (page 1) with the key from WM_KEY.
wrk.headers["Api-Key"] = os.getenv("WM_KEY")
response = function(status, headers, body)
  if status ~= 200 then
    io.stderr:write("unexpected status " .. status .. "\n")
  end
end
