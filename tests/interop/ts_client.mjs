// Drive an MCP server with the official TypeScript SDK's client, as a child process.
//
//     node ts_client.mjs COMMAND [ARG ...]
//
// The script speaks to `trio-mcp demo` (behind the recording proxy) over stdio and prints one
// JSON object with what it saw, for test_official_clients.py to assert on.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

// After the cancel and the ping that follows it, how long to keep listening for frames that
// must not come (a response or progress for the cancelled call). This bounded window can only
// make the test fail (by catching a late frame), never make it pass.
const OBSERVATION_WINDOW_MS = 500;

const [command, ...args] = process.argv.slice(2);
if (!command) {
  process.stderr.write("usage: node ts_client.mjs COMMAND [ARG ...]\n");
  process.exit(2);
}

const transport = new StdioClientTransport({ command, args, stderr: "inherit" });
const client = new Client({ name: "ts-interop-client", version: "0.0.0" });
await client.connect(transport);

const out = {};
out.serverVersion = client.getServerVersion();
out.tools = (await client.listTools()).tools.map((tool) => tool.name).sort();
out.echo = await client.callTool({ name: "echo", arguments: { text: "hello from ts" } });
out.add = await client.callTool({ name: "add", arguments: { a: 2, b: 3 } });
out.addFraction = await client.callTool({ name: "add", arguments: { a: 0.5, b: 0.25 } });
out.prompts = (await client.listPrompts()).prompts;
out.prompt = await client.getPrompt({ name: "greeting", arguments: { name: "Ada" } });
out.promptStyled = await client.getPrompt({
  name: "greeting",
  arguments: { name: "Ada", style: "formal" },
});
out.resources = (await client.listResources()).resources;
out.templates = (await client.listResourceTemplates()).resourceTemplates;
out.readme = await client.readResource({ uri: "demo://readme" });
out.templated = await client.readResource({ uri: "demo://greeting/Ada" });

const progress = [];
out.sleep = await client.callTool({ name: "sleep", arguments: { seconds: 0.3 } }, undefined, {
  onprogress: (p) => progress.push(p),
});
out.sleepProgress = progress;

// Cancel a long sleep with the SDK's own mechanism, an AbortSignal in the request options,
// once its first progress arrives. The SDK then sends notifications/cancelled.
const controller = new AbortController();
const beforeCancel = [];
const afterCancel = [];
try {
  await client.callTool({ name: "sleep", arguments: { seconds: 60 } }, undefined, {
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

// A request after the cancel: its response proves the server has read the cancel (one ordered
// stream), and the connection still works.
out.ping = await client.ping();
await new Promise((resolve) => setTimeout(resolve, OBSERVATION_WINDOW_MS));
out.progressAfterCancel = afterCancel;
out.echoAfterCancel = await client.callTool({ name: "echo", arguments: { text: "still here" } });

await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
