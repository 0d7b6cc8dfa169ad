// Drive an MCP server over WebSocket with the official TypeScript SDK's client.
//
//     node ts_ws_client.mjs URL
//
// Node 22 has a global WebSocket, which the SDK's WebSocketClientTransport uses (subprotocol
// `mcp`). The script lists the tools, calls `echo`, calls `steps` with a progress handler,
// cancels a `hold` call with an AbortSignal once its first progress arrives, checks that the
// connection still works, and prints one JSON object with what it saw for test_ws_interop.py.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { WebSocketClientTransport } from "@modelcontextprotocol/sdk/client/websocket.js";

const [url] = process.argv.slice(2);
if (!url) {
  process.stderr.write("usage: node ts_ws_client.mjs URL\n");
  process.exit(2);
}

const transport = new WebSocketClientTransport(new URL(url));
const client = new Client({ name: "ts-ws-interop-client", version: "0.0.0" });
await client.connect(transport);

const out = {};
out.serverVersion = client.getServerVersion();
out.tools = (await client.listTools()).tools.map((tool) => tool.name).sort();
out.echo = await client.callTool({ name: "echo", arguments: { text: "hello over ws" } });

const progress = [];
out.steps = await client.callTool({ name: "steps", arguments: { count: 3 } }, undefined, {
  onprogress: (p) => progress.push(p),
});
out.stepsProgress = progress;

const controller = new AbortController();
try {
  await client.callTool({ name: "hold", arguments: {} }, undefined, {
    signal: controller.signal,
    onprogress: () => controller.abort("interop cancel"),
  });
  out.cancelOutcome = "returned";
} catch (error) {
  out.cancelOutcome = "rejected";
  out.cancelError = String(error?.message ?? error);
}

// Long enough for the server's keep-alive pings (every 0.5 s in the test), which the SDK answers.
await new Promise((resolve) => setTimeout(resolve, 1200));
out.echoAfterCancel = await client.callTool({ name: "echo", arguments: { text: "still here" } });
process.stdout.write(JSON.stringify(out) + "\n");
await client.close();
