// Sign in to a protected MCP server with the official TypeScript SDK's OAuth client, then use it.
//
//     node ts_oauth_client.mjs URL [--client-id ID] [TOOL]...
//
// The SDK's StreamableHTTPClientTransport, given an OAuthClientProvider, does the flow: the
// 401, the Protected Resource Metadata, the authorization server's metadata, dynamic client
// registration, PKCE, the resource indicator, and on a 403 insufficient_scope a new
// authorization for the challenged scopes. What it leaves to the application is the browser
// and the code: redirectToAuthorization() is asked to send the user away, the connection fails
// with UnauthorizedError, and the application hands the code to transport.finishAuth() and
// connects again.
//
// The browser step is the parent's: this script writes {"authorize": URL} as one line on stdout
// and reads one line from stdin, the redirect the sign-in ended with (tests/auth/_oidc.py's
// drive_login signs in). Once signed in it lists the tools, calls each TOOL (no arguments) and
// lists the tools again, then writes {"report": {...}}: the tool names before and after the
// calls, each call's text and error flag, and the scope asked for at each authorization. No token is ever written.
//
// With --client-id the client is the one registered in advance, its secret in the environment
// variable OAUTH_CLIENT_SECRET, and nothing is registered. A dynamically registered client
// registers for the scope of its first authorization, and an authorization server that holds
// it to that (oidc-provider does) refuses a step-up to a wider scope. Either way the client
// keeps no refresh token (and registers for the authorization_code grant only): holding one,
// the SDK (1.32) answers a 403 insufficient_scope by refreshing, which cannot widen the scope,
// and then gives up, instead of authorizing again.
import { randomBytes } from "node:crypto";
import { createInterface } from "node:readline";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

// Where the provider sends the browser back to; nothing listens there.
const REDIRECT_URI = "http://127.0.0.1:53682/callback";
// More sign-ins than this is a loop.
const MAX_SIGN_INS = 3;

let [url, ...toolNames] = process.argv.slice(2);
if (!url) {
  process.stderr.write("usage: node ts_oauth_client.mjs URL [--client-id ID] [TOOL]...\n");
  process.exit(2);
}
let preRegistered;
if (toolNames[0] === "--client-id") {
  preRegistered = { client_id: toolNames[1], client_secret: process.env.OAUTH_CLIENT_SECRET };
  toolNames = toolNames.slice(2);
}

function say(message) {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

const stdinLines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

// The SDK's OAuthClientProvider, in memory. redirectToAuthorization hands the URL to the parent
// and keeps the code of the redirect it gets back, for finishAuth.
class ParentBrowserProvider {
  constructor(client) {
    this._client = client;
    this._tokens = undefined;
    this._verifier = undefined;
    this._state = undefined;
    this.code = undefined;
    this.scopes = [];
  }

  get redirectUrl() {
    return REDIRECT_URI;
  }

  get clientMetadata() {
    return {
      client_name: "official typescript sdk (interop)",
      redirect_uris: [REDIRECT_URI],
      grant_types: ["authorization_code"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
      application_type: "native",
    };
  }

  state() {
    this._state = randomBytes(16).toString("base64url");
    return this._state;
  }

  clientInformation() {
    return this._client;
  }

  saveClientInformation(information) {
    this._client = information;
  }

  tokens() {
    return this._tokens;
  }

  saveTokens(tokens) {
    const { refresh_token: _dropped, ...kept } = tokens;
    this._tokens = kept;
  }

  saveCodeVerifier(verifier) {
    this._verifier = verifier;
  }

  codeVerifier() {
    if (this._verifier === undefined) throw new Error("no code verifier saved");
    return this._verifier;
  }

  async redirectToAuthorization(authorizationUrl) {
    this.scopes.push(authorizationUrl.searchParams.get("scope"));
    say({ authorize: authorizationUrl.href });
    const { value, done } = await stdinLines.next();
    if (done) throw new Error("the parent closed stdin instead of handing over the redirect");
    const redirect = new URL(value.trim());
    if (redirect.searchParams.get("state") !== this._state) {
      throw new Error("the redirect's state is not the one this client sent");
    }
    const code = redirect.searchParams.get("code");
    if (!code) throw new Error(`the sign-in ended without a code: ${redirect.searchParams.get("error")}`);
    this.code = code;
  }
}

const provider = new ParentBrowserProvider(preRegistered);
let transport;
let client;

// Run `step` (which uses the current client); when the SDK stopped for a sign-in, finish it
// with the code the parent handed over and run the step again.
async function signedIn(step) {
  for (let attempt = 0; ; attempt += 1) {
    try {
      return await step();
    } catch (error) {
      if (!(error instanceof UnauthorizedError) || provider.code === undefined || attempt >= MAX_SIGN_INS) {
        throw error;
      }
      const code = provider.code;
      provider.code = undefined;
      await transport.finishAuth(code);
    }
  }
}

async function connect() {
  transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  client = new Client({ name: "ts-oauth-interop-client", version: "0.0.0" });
  await client.connect(transport);
}

await signedIn(connect);
const report = { calls: {} };
report.tools = (await client.listTools()).tools.map((tool) => tool.name).sort();
for (const name of toolNames) {
  const result = await signedIn(() => client.callTool({ name, arguments: {} }));
  report.calls[name] = {
    text: result.content.map((block) => block.text ?? "").join(""),
    isError: result.isError ?? false,
  };
}
report.tools_after = (await client.listTools()).tools.map((tool) => tool.name).sort();
report.authorization_scopes = provider.scopes;
say({ report });
await transport.terminateSession().catch(() => {});
await client.close();
process.exit(0);
