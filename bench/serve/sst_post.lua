-- wrk script for `weft serve`: POSTs the SST test trees one per request, each as
-- {"instances": ["(3 (2 a) ...)"]}, cycling through the file. Every wrk thread reads the file.
--   SST_FILE=../shared/data/sst/test.txt wrk -t4 -c64 -d20s --latency -s bench/serve/sst_post.lua \
--     http://127.0.0.1:8080/v1/models/sentiment:predict
local path = os.getenv("SST_FILE") or "../shared/data/sst/test.txt"
local bodies = {}
for line in io.lines(path) do
  if line:match("%S") then
    local escaped = line:gsub("\\", "\\\\"):gsub('"', '\\"')
    bodies[#bodies + 1] = '{"instances": ["' .. escaped .. '"]}'
  end
end
local i = 0
request = function()
  i = i % #bodies + 1
  return wrk.format("POST", nil, {["Content-Type"] = "application/json"}, bodies[i])
end
