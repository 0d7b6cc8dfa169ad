-- The wrk script of the HTTP section: `tools/call echo` POSTed as http_driver.mjs sends it.
--
--     wrk -t1 -c10 -d10s -s wrk_echo.lua http://127.0.0.1:PORT/mcp -- ERA [SESSION VERSION]
--
-- ERA is "handshake" (SESSION: the Mcp-Session-Id run.py opened with `initialize` and
-- `notifications/initialized`; VERSION: the protocol version the server chose) or "modern"
-- (2026-07-28: no session, the `_meta` envelope and the Mcp-Method / Mcp-Name headers). Every
-- request has a fresh id and text (`hello N`), as the driver's do: the handshake era's one
-- session serves every connection, and a JSON-RPC id must not repeat among its calls in flight
-- (the ids count per wrk thread: run.py runs one, `-t1`).
-- A response counts as bad unless its status is 200 and its body holds the echoed text (a JSON
-- body or an SSE event alike). `done` prints one JSON object: the calls, the seconds, the
-- latency percentiles in microseconds, the bad answers and wrk's own error counts.

local MODERN = "2026-07-28"
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

local counter = 0
bad = 0 -- a global: `done` reads it from each thread with thread:get
local prefix
local middle
local suffix

function init(args)
  local era = args[1]
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Accept"] = "application/json, text/event-stream"
  prefix = '{"jsonrpc":"2.0","id":'
  middle = ',"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello '
  if era == "modern" then
    wrk.headers["MCP-Protocol-Version"] = MODERN
    wrk.headers["Mcp-Method"] = "tools/call"
    wrk.headers["Mcp-Name"] = "echo"
    suffix = '"},"_meta":{"io.modelcontextprotocol/protocolVersion":"' .. MODERN
      .. '","io.modelcontextprotocol/clientCapabilities":{}}}}'
  elseif era == "handshake" then
    wrk.headers["Mcp-Session-Id"] = args[2]
    wrk.headers["MCP-Protocol-Version"] = args[3]
    suffix = '"}}}'
  else
    error("wrk_echo.lua: the era is handshake or modern, not " .. tostring(era))
  end
end

function request()
  counter = counter + 1
  local n = tostring(counter)
  return wrk.format(nil, nil, nil, prefix .. n .. middle .. n .. suffix)
end

-- wrk answers in order on each connection, and a connection has one request in flight; the
-- text alone would not say which call an answer is for, so the check is that some echo came.
function response(status, headers, body)
  if status ~= 200 or not string.find(body, '"text":"hello ', 1, true) then
    bad = bad + 1
  end
end

function done(summary, latency, requests)
  local wrong = 0
  for _, thread in ipairs(threads) do
    wrong = wrong + thread:get("bad")
  end
  local e = summary.errors
  io.write(string.format(
    '{"requests":%d,"seconds":%.6f,"p50_us":%d,"p90_us":%d,"p99_us":%d,"mean_us":%.1f,'
      .. '"bad":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d}\n',
    summary.requests, summary.duration / 1e6, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.mean, wrong, e.connect, e.read, e.write, e.status, e.timeout
  ))
end
