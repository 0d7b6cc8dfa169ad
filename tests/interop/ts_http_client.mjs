// Drive an MCP server over Streamable HTTP with the official TypeScript SDK's client.
//
//     node ts_http_client.mjs URL [sse]
//
// The script speaks to demo_http_server.py (trio_mcp's demo plus a `slow` tool) through the
// SDK's StreamableHTTPClientTransport (or, with `sse`, its HTTP+SSE SSEClientTransport, URL
// then being the event stream's) and prints one JSON object with what it saw, for
// test_http_interop.py to assert on; it then stays connected until its stdin is closed (so the
// test can check the server side first), and ends its session.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

// After the cancel and the request that follows it, how long to keep listening for progress
// that must not come. This bounded window can only make the test fail (by catching a late
// progress), never make it pass.
const OBSERVATION_WINDOW_MS = 500;

const [url, kind] = process.argv.slice(2);
if (!url || (kind !== undefined && kind !== "sse")) {
  process.stderr.write("usage: node ts_http_client.mjs URL [sse]\n");
  process.exit(2);
}

const transport =
  kind === "sse" ? new SSEClientTransport(new URL(url)) : new StreamableHTTPClientTransport(new URL(url));
const client = new Client({ name: "ts-interop-client", version: "0.0.0" });
await client.connect(transport);

const out = {};
out.protocolVersion = transport.protocolVersion ?? null;
out.sessionId = transport.sessionId ?? null;
out.serverVersion = client.getServerVersion();
out.tools = (await client.listTools()).tools.map((tool) => tool.name).sort();
out.echo = await client.callTool({ name: "echo", arguments: { text: "hello from ts" } });
out.add = await client.callTool({ name: "add", arguments: { a: 2, b: 3 } });
out.addFraction = await client.callTool({ name: "add", arguments: { a: 0.5, b: 0.25 } });
out.prompt = await client.getPrompt({ name: "greeting", arguments: { name: "Ada" } });
out.readme = await client.readResource({ uri: "demo://readme" });
out.templated = await client.readResource({ uri: "demo://greeting/Ada" });

const progress = [];
out.sleep = await client.callTool({ name: "sleep", arguments: { seconds: 0.3 } }, undefined, {
  onprogress: (p) => progress.push(p),
});
out.sleepProgress = progress;

// Cancel a long `slow` call with the SDK's own mechanism, an AbortSignal in the request
// options, once its first progress arrives. The SDK then POSTs notifications/cancelled.
const controller = new AbortController();
const beforeCancel = [];
const afterCancel = [];
try {
  await client.callTool({ name: "slow", arguments: { steps: 100000 } }, undefined, {
    signal: controller.signal,
    onprogress: (p) => {
      if (controller.signal.aborted) {
        afterCancel.push(p);
      } else {
        beforeCancel.push(p);
        controller.abort("interop cancel");
      }
    },
  });
  out.cancelOutcome = "returned";
} catch (error) {
  out.cancelOutcome = "rejected";
  out.cancelError = String(error?.message ?? error);
}
out.progressBeforeCancel = beforeCancel;

// The session still works after the cancel.
out.barrierTools = (await client.listTools()).tools.map((tool) => tool.name).sort();
await new Promise((resolve) => setTimeout(resolve, OBSERVATION_WINDOW_MS));
out.progressAfterCancel = afterCancel;
out.echoAfterCancel = await client.callTool({ name: "echo", arguments: { text: "still here" } });

process.stdout.write(JSON.stringify(out) + "\n");
await new Promise((resolve) => {
  process.stdin.on("end", resolve);
  process.stdin.resume();
});
if (kind !== "sse") {
  await transport.terminateSession();
}
await client.close();
