// A host built on the official MCP Apps package (@modelcontextprotocol/ext-apps), driving the
// trio-mcp demo with the official TypeScript SDK 2.x client:
//
//     node ext_apps_host.mjs COMMAND [ARG ...]      (stdio)
//     node ext_apps_host.mjs --url URL             (Streamable HTTP)
//
// It does what a host does before and while it renders an app, with ext-apps' own host-side
// helpers and schemas: it declares the UI extension, finds each tool's UI and visibility,
// validates the tool and resource metadata, reads the app and checks its MIME type; then it
// runs the app's own script (in a node:vm context with a small stand-in for the DOM) behind
// ext-apps' AppBridge, sends it the tool's input and result, and lets the app call the tool
// again through the bridge. It prints one JSON object for test_ext_apps.py to assert on.
import vm from "node:vm";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import {
  AppBridge,
  McpUiResourceMetaSchema,
  McpUiToolMetaSchema,
  RESOURCE_MIME_TYPE,
  buildAllowAttribute,
  getToolUiResourceUri,
  isToolVisibilityAppOnly,
  isToolVisibilityModelOnly,
} from "@modelcontextprotocol/ext-apps/app-bridge";
import { EXTENSION_ID, getUiCapability } from "@modelcontextprotocol/ext-apps/server";

// Only a bound on how long to wait for the app to show something: a hang fails, never a pass.
const WAIT_MS = 10_000;

const argv = process.argv.slice(2);
if (argv.length === 0) {
  process.stderr.write("usage: node ext_apps_host.mjs (--url URL | COMMAND [ARG ...])\n");
  process.exit(2);
}
const transport =
  argv[0] === "--url"
    ? new StreamableHTTPClientTransport(new URL(argv[1]))
    : new StdioClientTransport({ command: argv[0], args: argv.slice(1), stderr: "inherit" });

const hostInfo = { name: "ext-apps-interop-host", version: "0.0.0" };
const client = new Client(hostInfo, {
  capabilities: { extensions: { [EXTENSION_ID]: { mimeTypes: [RESOURCE_MIME_TYPE] } } },
});
await client.connect(transport);

const out = {};
out.protocolVersion = client.getNegotiatedProtocolVersion() ?? null;
out.serverUi = getUiCapability(client.getServerCapabilities()) ?? null;

const issues = (parsed) => (parsed.success ? [] : parsed.error.issues.map((i) => i.message));

const { tools } = await client.listTools();
out.tools = tools
  .map((tool) => ({
    name: tool.name,
    resourceUri: getToolUiResourceUri(tool) ?? null,
    appOnly: isToolVisibilityAppOnly(tool),
    modelOnly: isToolVisibilityModelOnly(tool),
    metaIssues: tool._meta?.ui ? issues(McpUiToolMetaSchema.safeParse(tool._meta.ui)) : null,
  }))
  .sort((a, b) => a.name.localeCompare(b.name));

const add = tools.find((tool) => tool.name === "add");
const uri = getToolUiResourceUri(add);
const { resources } = await client.listResources();
const listed = resources.find((resource) => resource.uri === uri);
out.listed = {
  mimeType: listed.mimeType,
  metaIssues: issues(McpUiResourceMetaSchema.safeParse(listed._meta?.ui)),
};
const read = await client.readResource({ uri });
const [item] = read.contents;
// The content item's metadata first, the listing's as the fallback (as the spec asks).
const uiMeta = item._meta?.ui ?? listed._meta?.ui;
out.read = {
  count: read.contents.length,
  mimeType: item.mimeType,
  isAppMimeType: item.mimeType === RESOURCE_MIME_TYPE,
  metaIssues: issues(McpUiResourceMetaSchema.safeParse(uiMeta)),
  meta: uiMeta,
  allow: buildAllowAttribute(uiMeta.permissions),
  isHtml: /^<!doctype html>/i.test(item.text),
};

// -- render: the app's own script behind ext-apps' AppBridge ------------------------------------

const script = /<script>([\s\S]*?)<\/script>/.exec(item.text)[1];
const elements = {};
const element = (id) =>
  (elements[id] ??= {
    textContent: "",
    value: "0",
    listeners: {},
    addEventListener(type, listener) {
      (this.listeners[type] ??= []).push(listener);
    },
  });
const styleProperties = {};
const root = {
  style: { colorScheme: "", setProperty: (name, value) => (styleProperties[name] = value) },
  scrollWidth: 320,
  scrollHeight: 120,
};
const windowListeners = [];

// The bridge's side of the frame: what it sends arrives as a "message" event from the parent;
// what the app posts to its parent reaches the bridge. Both asynchronous, as postMessage is.
const parent = {
  postMessage(message) {
    setTimeout(() => frame.onmessage?.(structuredClone(message)), 0);
  },
};
const frame = {
  async start() {},
  async send(message) {
    setTimeout(() => {
      for (const listener of windowListeners) {
        listener({ data: structuredClone(message), source: parent });
      }
    }, 0);
  },
  async close() {
    frame.onclose?.();
  },
};

const bridge = new AppBridge(
  client,
  hostInfo,
  { serverTools: {}, openLinks: {}, logging: {} },
  { hostContext: { theme: "dark", displayMode: "inline", styles: { variables: { "--font-sans": "serif" } } } },
);
const sizes = [];
bridge.onsizechange = (size) => sizes.push(size);
const initialized = new Promise((resolve) => (bridge.oninitialized = resolve));
await bridge.connect(frame);

vm.runInNewContext(script, {
  window: {
    parent,
    addEventListener: (type, listener) => type === "message" && windowListeners.push(listener),
  },
  document: { getElementById: element, documentElement: root },
  navigator: {},
  setTimeout,
});

const until = async (what, predicate) => {
  const deadline = Date.now() + WAIT_MS;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`the app never showed ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
};

await initialized;
out.app = { info: bridge.getAppVersion(), capabilities: bridge.getAppCapabilities() };
await until("'ready'", () => elements.status?.textContent === "ready");
out.themed = { colorScheme: root.style.colorScheme, font: styleProperties["--font-sans"] ?? null };

// The host runs the tool and hands the app its input and its result.
const args = { a: 2, b: 3 };
const result = await client.callTool({ name: "add", arguments: args });
out.callText = result.content.map((c) => c.text).join("");
await bridge.sendToolInput({ arguments: args });
await bridge.sendToolResult(result);
await until("the sum 5", () => elements.sum?.textContent === "5");
out.shown = elements.sum.textContent;

// The user adds again in the app: its tools/call goes through the bridge to the server.
elements.a.value = "40";
elements.b.value = "2";
for (const listener of elements.form.listeners.submit) listener({ preventDefault() {} });
await until("the sum 42", () => elements.sum?.textContent === "42");
out.shownAfterAppCall = elements.sum.textContent;
out.sizes = sizes;

out.teardown = await bridge.teardownResource({});
await bridge.close();
await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(0);
