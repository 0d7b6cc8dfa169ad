// Drive an MCP server with the TypeScript SDK's second generation (@modelcontextprotocol/client),
// once per protocol era, in one process.
//
//     node ts2_client.mjs ERAS stdio COMMAND [ARG ...]
//     node ts2_client.mjs ERAS http URL
//
// ERAS is a comma-separated list: a handshake-era version (the client offers exactly it in
// `initialize`), `pin` (the modern era, 2026-07-28, pinned) or `auto` (the SDK's probe with
// `server/discover`, falling back to `initialize`). Over stdio, an argument `{era}` in COMMAND
// is replaced by the era, so each connection can be recorded to a log of its own.
//
// The server is trio_mcp's demo with the tools that ask (tests/interop/peer_server.py). For each
// era the script runs every scenario (tools, resources, prompts, progress, a cancel with an
// AbortSignal, elicitation, sampling, multi round-trip requests) and prints one JSON object,
// keyed by era, for test_v2_interop.py to assert on. Over HTTP every POST the SDK makes is
// logged (method, MRTR fields, status) through the transport's `fetch` option.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

// How long to keep listening, after the cancel and the request that follows it, for progress
// that must not come. This bounded window can only make the test fail, never make it pass.
const OBSERVATION_WINDOW_MS = 300;

const [eraList, kind, ...rest] = process.argv.slice(2);
if (!eraList || (kind !== "stdio" && kind !== "http") || rest.length === 0) {
  process.stderr.write("usage: node ts2_client.mjs ERAS stdio COMMAND [ARG ...] | ERAS http URL\n");
  process.exit(2);
}

// Elicitation exists from 2025-06-18 on.
function canElicit(era) {
  return era === "pin" || era === "auto" || era >= "2025-06-18";
}

function textOf(result) {
  return result.content?.[0]?.text ?? result.messages?.[0]?.content?.text ?? null;
}

function makeTransport(era, posts) {
  if (kind === "stdio") {
    const [command, ...args] = rest.map((arg) => arg.replaceAll("{era}", era));
    return new StdioClientTransport({ command, args, stderr: "inherit" });
  }
  // Log every POST: its JSON-RPC method and id, the MRTR fields, the headers, the status.
  const logged = async (input, init) => {
    const response = await fetch(input, init);
    if ((init?.method ?? "GET") === "POST" && typeof init.body === "string") {
      const body = JSON.parse(init.body);
      const headers = new Headers(init.headers);
      posts.push({
        method: body.method ?? null,
        id: body.id ?? null,
        name: body.params?.name ?? null,
        arguments: body.params?.arguments ?? null,
        inputResponses: Object.keys(body.params?.inputResponses ?? {}).sort(),
        requestState: typeof body.params?.requestState === "string",
        version: headers.get("mcp-protocol-version"),
        session: headers.has("mcp-session-id"),
        status: response.status,
      });
    }
    return response;
  };
  return new StreamableHTTPClientTransport(new URL(rest[0]), { fetch: logged });
}

function makeClient(era, asked) {
  const options = {
    capabilities: { sampling: {}, elicitation: { form: {} } },
  };
  if (era === "pin") {
    options.versionNegotiation = { mode: { pin: "2026-07-28" } };
  } else if (era === "auto") {
    options.versionNegotiation = { mode: "auto" };
  } else {
    options.supportedProtocolVersions = [era];
  }
  const client = new Client({ name: "ts2-interop-client", version: "2.4.0" }, options);
  client.setRequestHandler("elicitation/create", async (request) => {
    const message = request.params.message;
    asked.push(["elicitation", message]);
    if (message === "Which dates?") {
      return { action: "accept", content: { dates: "1-3 May" } };
    }
    return { action: "accept", content: { ok: true } };
  });
  client.setRequestHandler("sampling/createMessage", async (request) => {
    const first = request.params.messages[0].content;
    asked.push(["sampling", first.text]);
    return {
      role: "assistant",
      content: { type: "text", text: `model says: ${first.text}` },
      model: "ts2-model",
      stopReason: "endTurn",
    };
  });
  return client;
}

async function cancelledIds(client) {
  const result = await client.callTool({ name: "cancelled", arguments: {} });
  return result.structuredContent?.result ?? [];
}

async function scenario(era) {
  const posts = [];
  const asked = [];
  const client = makeClient(era, asked);
  await client.connect(makeTransport(era, posts));
  const out = { posts, asked };
  out.protocolVersion = client.getNegotiatedProtocolVersion() ?? null;
  out.era = client.getProtocolEra() ?? null;
  out.serverVersion = client.getServerVersion() ?? null;
  out.tools = (await client.listTools()).tools.map((tool) => tool.name).sort();
  out.echo = await client.callTool({ name: "echo", arguments: { text: "hello from ts2" } });
  out.add = await client.callTool({ name: "add", arguments: { a: 2, b: 3 } });
  out.prompts = (await client.listPrompts()).prompts.map((prompt) => prompt.name).sort();
  out.prompt = textOf(await client.getPrompt({ name: "greeting", arguments: { name: "Ada" } }));
  out.resources = (await client.listResources()).resources.map((r) => r.uri);
  out.templates = (await client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);
  out.readme = (await client.readResource({ uri: "demo://readme" })).contents;
  out.templated = (await client.readResource({ uri: "demo://greeting/Ada" })).contents;

  const progress = [];
  out.sleep = textOf(
    await client.callTool({ name: "sleep", arguments: { seconds: 0.3 } }, { onprogress: (p) => progress.push(p) }),
  );
  out.sleepProgress = progress.map((p) => [p.progress, p.total, p.message]);

  out.summarize = textOf(await client.callTool({ name: "summarize", arguments: { text: "a long text" } }));
  if (canElicit(era)) {
    out.book = textOf(await client.callTool({ name: "book", arguments: { city: "Lisbon" } }));
    out.plan = textOf(await client.callTool({ name: "plan", arguments: { city: "Porto" } }));
    out.confirm = textOf(await client.getPrompt({ name: "confirm", arguments: { topic: "trio" } }));
  }

  // Cancel a long `slow` with the SDK's own mechanism, an AbortSignal, at its first progress.
  const known = (await cancelledIds(client)).length;
  const controller = new AbortController();
  const before = [];
  const after = [];
  try {
    await client.callTool(
      { name: "slow", arguments: { steps: 100000 } },
      {
        signal: controller.signal,
        onprogress: (p) => {
          if (controller.signal.aborted) {
            after.push(p.progress);
          } else {
            before.push(p.progress);
            controller.abort("interop cancel");
          }
        },
      },
    );
    out.cancelOutcome = "returned";
  } catch (error) {
    out.cancelOutcome = "rejected";
    out.cancelError = String(error?.message ?? error);
  }
  out.progressBeforeCancel = before;
  // While still connected, the server's handler must have been cancelled: poll its record.
  let ids = await cancelledIds(client);
  for (let tries = 0; ids.length === known && tries < 100; tries++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    ids = await cancelledIds(client);
  }
  out.cancelledIds = ids.slice(known);
  await new Promise((resolve) => setTimeout(resolve, OBSERVATION_WINDOW_MS));
  out.progressAfterCancel = after;
  out.echoAfterCancel = textOf(await client.callTool({ name: "echo", arguments: { text: "still here" } }));
  await client.close();
  return out;
}

const report = {};
for (const era of eraList.split(",")) {
  try {
    report[era] = await scenario(era);
  } catch (error) {
    report[era] = { failed: String(error?.stack ?? error) };
  }
}
process.stdout.write(JSON.stringify(report) + "\n");
