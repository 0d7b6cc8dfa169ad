// A real OAuth 2.1 / OpenID Connect authorization server for the OAuth tests: oidc-provider (the
// certified provider, pinned in package.json), on 127.0.0.1 only.
//
//     node tests/auth/oidc_provider.mjs [PORT] [--redirect-uri URI]... [--user NAME --password PW]...
//         [--access-token-format jwt|opaque] [--access-token-ttl SECONDS]
//
// PORT 0 (the default) binds a free port. Once it serves, stdout gets two lines: the issuer URL,
// then one JSON object with the pre-registered test client (client_id, client_secret, a fresh
// random secret each run, and its redirect_uris) and the resource server's own client
// (resource_client_id, resource_client_secret: client_secret_post, no grants, for token
// introspection). The provider's own warnings go to stderr. It stops on SIGTERM, SIGINT, or, when
// its stdin is a pipe, when that pipe ends (so it never outlives a test that started it).
//
// With stdin a pipe, it also takes commands there, one a line, each answered by one line on stdout:
// ANSWER_PREFIX, then a JSON object (oidc-provider writes notices to stdout too, which the prefix
// tells apart):
//     rotate-keys    a new ES256 key (a new kid) signs the access tokens from now on; the key set
//                    publishes it beside every earlier one. Answer: {"rotated": "<new kid>"}.
// (A new Provider with the same issuer, clients, cookie keys and in-memory store takes over the
// handler, so grants, sessions and opaque tokens issued before carry over. The store is given
// explicitly: the default adapter makes a new one for each Provider.)
//
// Configured as an MCP authorization server: PKCE required for every client (S256 only), open
// dynamic registration, RFC 8707 resource indicators (a token requested for a loopback http(s)
// resource is a JWT whose `aud` is that resource, scopes `mcp:tools` and `mcp:admin`), RFC 9207
// `iss` on every authorization response, introspection, revocation, refresh tokens with
// `offline_access`, the accounts given (alice by default), the in-memory store, and the provider's
// development login and consent screens (driven over HTTP by tests/auth/_oidc.py). The login
// screen accepts only those accounts, each with its own password. Access tokens for a resource
// are JWTs (`--access-token-format opaque`: opaque, for introspection) living
// `--access-token-ttl` seconds (600 by default).

import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { fstatSync } from 'node:fs';
import * as http from 'node:http';
import * as querystring from 'node:querystring';
import * as readline from 'node:readline';

import Provider, { errors } from 'oidc-provider';
import { createMemoryAdapter } from 'oidc-provider/lib/adapters/memory_adapter.js';

const RESOURCE_SCOPES = 'mcp:tools mcp:admin';
const CLIENT_ID = 'trio-mcp-tests';
const RESOURCE_CLIENT_ID = 'trio-mcp-resource-server';
const ANSWER_PREFIX = 'oidc-provider-harness-answer ';

function parseArgs(argv) {
  const options = {
    port: 0,
    redirectUris: [],
    users: [],
    accessTokenFormat: 'jwt',
    accessTokenTtl: 600,
  };
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i];
    const value = () => {
      i += 1;
      if (i >= argv.length) throw new Error(`${arg} needs a value`);
      return argv[i];
    };
    if (arg === '--redirect-uri') options.redirectUris.push(value());
    else if (arg === '--user') options.users.push({ name: value(), password: undefined });
    else if (arg === '--password') {
      const user = options.users.at(-1);
      if (user === undefined || user.password !== undefined) {
        throw new Error('--password follows the --user it is for');
      }
      user.password = value();
    } else if (arg === '--access-token-format') {
      options.accessTokenFormat = value();
      if (!['jwt', 'opaque'].includes(options.accessTokenFormat)) {
        throw new Error('--access-token-format is jwt or opaque');
      }
    } else if (arg === '--access-token-ttl') {
      options.accessTokenTtl = Number(value());
      if (!Number.isInteger(options.accessTokenTtl) || options.accessTokenTtl < 1) {
        throw new Error('--access-token-ttl is a whole number of seconds');
      }
    } else if (/^\d+$/.test(arg)) options.port = Number(arg);
    else throw new Error(`unknown argument ${arg}`);
  }
  if (options.users.length === 0) {
    options.users.push({ name: 'alice', password: 'correct horse battery staple' });
  }
  for (const user of options.users) {
    if (user.password === undefined) throw new Error(`--user ${user.name} needs a --password`);
  }
  if (options.redirectUris.length === 0) {
    // A native client's loopback redirect URI matches at any port (RFC 8252 section 7.3).
    options.redirectUris.push('http://127.0.0.1/callback');
  }
  return options;
}

function isLoopbackResource(indicator) {
  let url;
  try {
    url = new URL(indicator);
  } catch {
    return false;
  }
  return (
    (url.protocol === 'http:' || url.protocol === 'https:')
    && ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname)
    && url.hash === ''
  );
}

function ecKey(kid) {
  const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'jwk' });
  return { ...ec, kid, alg: 'ES256', use: 'sig' };
}

function signingKeys() {
  // Fresh keys every run: RS256 for ID tokens, ES256 for the access tokens (the last of `ec`
  // signs them; rotation appends).
  const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' });
  return {
    rsa: { ...rsa, kid: 'rs256-test', alg: 'RS256', use: 'sig' },
    ec: [ecKey('es256-test')],
  };
}

function configuration(options, clients, keys, cookieKeys, adapter) {
  const accounts = new Map(options.users.map((user) => [user.name, { password: user.password }]));
  const accessKid = keys.ec.at(-1).kid;
  return {
    adapter,
    clients,
    jwks: { keys: [keys.rsa, ...keys.ec] },
    cookies: { keys: cookieKeys },
    // The resource scopes are listed too: clients may name them in their registration's `scope`.
    scopes: ['openid', 'offline_access', ...RESOURCE_SCOPES.split(' ')],
    claims: { openid: ['sub'] },
    responseTypes: ['code'],
    pkce: { required: () => true },
    // oidc-provider keeps `offline_access` only with `prompt=consent` (OpenID Connect Core), which
    // an MCP client does not send: every client registered for the refresh_token grant gets a
    // refresh token, rotated on use.
    async issueRefreshToken(_ctx, client) {
      return client.grantTypeAllowed('refresh_token');
    },
    rotateRefreshToken: true,
    async findAccount(_ctx, id) {
      if (!accounts.has(id)) return undefined;
      return {
        accountId: id,
        async claims() {
          return { sub: id };
        },
      };
    },
    features: {
      devInteractions: { enabled: true },
      registration: { enabled: true },
      introspection: { enabled: true },
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        async defaultResource(_ctx, _client, oneOf) {
          return oneOf;
        },
        async useGrantedResource() {
          // A refresh or code exchange without `resource` gets the audience already granted.
          return true;
        },
        async getResourceServerInfo(_ctx, indicator) {
          if (!isLoopbackResource(indicator)) {
            throw new errors.InvalidTarget('this test provider serves loopback resources only');
          }
          const info = {
            scope: RESOURCE_SCOPES,
            audience: indicator,
            accessTokenTTL: options.accessTokenTtl,
            accessTokenFormat: options.accessTokenFormat,
          };
          if (options.accessTokenFormat === 'jwt') info.jwt = { sign: { alg: 'ES256', kid: accessKid } };
          return info;
        },
      },
    },
    ttl: {
      AccessToken: options.accessTokenTtl,
      AuthorizationCode: 60,
      ClientCredentials: 600,
      DeviceCode: 600,
      BackchannelAuthenticationRequest: 600,
      Grant: 3600,
      IdToken: 600,
      Interaction: 600,
      PreAuthorizedCode: 600,
      RefreshToken: 3600,
      Session: 3600,
    },
    // The development login screen takes any name; this one checks the account's password
    // first, as a real login screen would (the consent form passes through untouched).
    accounts,
  };
}

function checkLogin(accounts) {
  return async function loginCheck(ctx, next) {
    if (
      ctx.method === 'POST'
      && /^\/interaction\/[^/]+$/.test(ctx.path)
      && ctx.is('application/x-www-form-urlencoded')
    ) {
      const chunks = [];
      let size = 0;
      for await (const chunk of ctx.req) {
        size += chunk.length;
        if (size > 16 * 1024) ctx.throw(413, 'form too large');
        chunks.push(chunk);
      }
      const raw = Buffer.concat(chunks).toString('utf8');
      const form = querystring.parse(raw);
      if (form.prompt === 'login') {
        const account = accounts.get(String(form.login));
        if (account === undefined || account.password !== String(form.password)) {
          ctx.status = 401;
          ctx.type = 'html';
          ctx.body = '<!DOCTYPE html><title>Sign-in</title><p>Invalid login or password.</p>';
          return;
        }
      }
      // oidc-provider reads an already-read body from req.body.
      ctx.req.body = raw;
    }
    await next();
  };
}

function main() {
  const options = parseArgs(process.argv.slice(2));
  let handler = (_req, res) => {
    res.statusCode = 503;
    res.end();
  };
  const server = http.createServer((req, res) => handler(req, res));
  // Node closes an idle keep-alive connection after 5 s, and the Python clients' httpx pools
  // keep one 5 s too: a token request sent as Node closes the connection meets the close
  // ("server disconnected without sending a response"), and the official SDK's client does
  // not retry it. A sign-in whose browser step took about 5 s on a loaded machine failed so.
  // The server keeps idle connections longer than any client here does.
  server.keepAliveTimeout = 75_000;
  server.headersTimeout = 76_000; // Node wants it above keepAliveTimeout
  const stop = () => {
    server.close();
    server.closeAllConnections();
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  const piped = fstatSync(0).isFIFO();

  server.listen(options.port, '127.0.0.1', () => {
    const { port } = server.address();
    const issuer = `http://127.0.0.1:${port}`;
    const client = {
      client_id: CLIENT_ID,
      client_secret: randomBytes(24).toString('base64url'),
      application_type: 'native',
      redirect_uris: options.redirectUris,
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
    };
    // The protected resource's own client: it only introspects tokens.
    const resourceClient = {
      client_id: RESOURCE_CLIENT_ID,
      client_secret: randomBytes(24).toString('base64url'),
      redirect_uris: [],
      grant_types: [],
      response_types: [],
      token_endpoint_auth_method: 'client_secret_post',
    };
    const keys = signingKeys();
    const cookieKeys = [randomBytes(32).toString('base64url')];
    const adapter = createMemoryAdapter();
    const serve = () => {
      const { accounts, ...config } = configuration(
        options,
        [client, resourceClient],
        keys,
        cookieKeys,
        adapter,
      );
      const provider = new Provider(issuer, config);
      provider.use(checkLogin(accounts));
      handler = provider.callback();
    };
    serve();
    process.stdout.write(`${issuer}\n`);
    process.stdout.write(`${JSON.stringify({
      client_id: client.client_id,
      client_secret: client.client_secret,
      redirect_uris: client.redirect_uris,
      resource_client_id: resourceClient.client_id,
      resource_client_secret: resourceClient.client_secret,
    })}\n`);

    if (piped) {
      // Started by a test through a pipe: gone with its parent, even one that was killed; and
      // the pipe carries the test's commands.
      const commands = readline.createInterface({ input: process.stdin, terminal: false });
      commands.on('close', stop);
      const answer = (value) => process.stdout.write(`${ANSWER_PREFIX}${JSON.stringify(value)}\n`);
      commands.on('line', (line) => {
        const command = line.trim();
        if (command === 'rotate-keys') {
          const kid = `es256-${keys.ec.length + 1}`;
          keys.ec.push(ecKey(kid));
          serve();
          answer({ rotated: kid });
        } else if (command !== '') {
          answer({ error: `unknown command ${command}` });
        }
      });
    }
  });
}

main();
