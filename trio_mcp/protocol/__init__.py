"""The sans-IO protocol core: JSON-RPC, types, versions, method tables, and the codecs of every
wire (newline framing, SSE, the modern HTTP headers, requestState sealing). No trio, no sockets
and no clocks in here: time is passed in."""
