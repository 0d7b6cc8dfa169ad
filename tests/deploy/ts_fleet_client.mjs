// Many handshake-era sessions through a load balancer with the official TypeScript SDK's client.
//
//     node tests/deploy/ts_fleet_client.mjs URL SESSIONS CALLS CONCURRENCY
//
// Each session (StreamableHTTPClientTransport: the initialize handshake, then calls on its
// Mcp-Session-Id) asks the fleet server's `backend` tool which process holds it, then makes
// CALLS `echo` calls and checks each answer; then ends its session. Prints one JSON object:
// the sessions and calls that succeeded, the first errors, the sessions per backend pid and
// the session ids' node tags.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, sessions, calls, concurrency] = process.argv.slice(2);
const report = { sessions_ok: 0, calls_ok: 0, errors: [], pids: {}, tags: {} };

function text(result) {
  if (result.isError) throw new Error(`the call failed: ${JSON.stringify(result)}`);
  return result.content[0].text;
}

async function session(number) {
  const transport = new StreamableHTTPClientTransport(new URL(url));
  const client = new Client({ name: "ts-fleet-client", version: "0.0.0" });
  try {
    await client.connect(transport);
    const tag = String(transport.sessionId).split(".")[0];
    const { pid } = JSON.parse(text(await client.callTool({ name: "backend", arguments: {} })));
    for (let call = 0; call < Number(calls); call++) {
      const word = `s${number}c${call}`;
      const got = text(await client.callTool({ name: "echo", arguments: { text: word } }));
      if (got !== word) throw new Error(`echo of ${word} came back as ${got}`);
      report.calls_ok++;
    }
    await transport.terminateSession();
    report.pids[pid] = (report.pids[pid] ?? 0) + 1;
    report.tags[tag] = (report.tags[tag] ?? 0) + 1;
    report.sessions_ok++;
  } catch (error) {
    if (report.errors.length < 5) report.errors.push(`session ${number}: ${error?.message ?? error}`);
  } finally {
    await client.close().catch(() => {});
  }
}

let next = 0;
async function worker() {
  while (next < Number(sessions)) await session(next++);
}
await Promise.all(Array.from({ length: Number(concurrency) }, worker));
process.stdout.write(JSON.stringify(report) + "\n");
