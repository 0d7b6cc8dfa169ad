// A real OAuth 2.1 / OpenID Connect authorization server for the OAuth tests: oidc-provider (the
// certified provider, pinned in package.json), on 127.0.0.1 only.
//
//     node tests/auth/oidc_provider.mjs [PORT] [--redirect-uri URI]... [--user NAME] [--password PW]
//
// PORT 0 (the default) binds a free port. Once it serves, stdout gets two lines: the issuer URL,
// then one JSON object with the pre-registered test client (client_id, client_secret, a fresh
// random secret each run, and its redirect_uris). Nothing else is written to stdout; the
// provider's own warnings go to stderr. It stops on SIGTERM, SIGINT, or, when its stdin is a
// pipe, when that pipe ends (so it never outlives a test that started it).
//
// Configured as an MCP authorization server: PKCE required for every client (S256 only), open
// dynamic registration, RFC 8707 resource indicators (a token requested for a loopback http(s)
// resource is a JWT whose `aud` is that resource, scopes `mcp:tools` and `mcp:admin`), RFC 9207
// `iss` on every authorization response, introspection, revocation, refresh tokens with
// `offline_access`, one account, the in-memory store, and the provider's development login and
// consent screens (driven over HTTP by tests/auth/_oidc.py). The login screen accepts only the
// one account and its password.

import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { fstatSync } from 'node:fs';
import * as http from 'node:http';
import * as querystring from 'node:querystring';

import Provider, { errors } from 'oidc-provider';

const RESOURCE_SCOPES = 'mcp:tools mcp:admin';
const CLIENT_ID = 'trio-mcp-tests';

function parseArgs(argv) {
  const options = { port: 0, redirectUris: [], user: 'alice', password: 'correct horse battery staple' };
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i];
    const value = () => {
      i += 1;
      if (i >= argv.length) throw new Error(`${arg} needs a value`);
      return argv[i];
    };
    if (arg === '--redirect-uri') options.redirectUris.push(value());
    else if (arg === '--user') options.user = value();
    else if (arg === '--password') options.password = value();
    else if (/^\d+$/.test(arg)) options.port = Number(arg);
    else throw new Error(`unknown argument ${arg}`);
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

function signingKeys() {
  // Fresh keys every run: RS256 for ID tokens, ES256 for the access tokens.
  const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' });
  const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'jwk' });
  return {
    keys: [
      { ...rsa, kid: 'rs256-test', alg: 'RS256', use: 'sig' },
      { ...ec, kid: 'es256-test', alg: 'ES256', use: 'sig' },
    ],
  };
}

function configuration(options, client) {
  const accounts = new Map([[options.user, { password: options.password }]]);
  return {
    clients: [client],
    jwks: signingKeys(),
    cookies: { keys: [randomBytes(32).toString('base64url')] },
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
          return {
            scope: RESOURCE_SCOPES,
            audience: indicator,
            accessTokenTTL: 600,
            accessTokenFormat: 'jwt',
            jwt: { sign: { alg: 'ES256' } },
          };
        },
      },
    },
    ttl: {
      AccessToken: 600,
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
  const stop = () => {
    server.close();
    server.closeAllConnections();
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  if (fstatSync(0).isFIFO()) {
    // Started by a test through a pipe: gone with its parent, even one that was killed.
    process.stdin.on('end', stop);
    process.stdin.resume();
  }

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
    const { accounts, ...config } = configuration(options, client);
    const provider = new Provider(issuer, config);
    provider.use(checkLogin(accounts));
    handler = provider.callback();
    process.stdout.write(`${issuer}\n`);
    process.stdout.write(`${JSON.stringify({
      client_id: client.client_id,
      client_secret: client.client_secret,
      redirect_uris: client.redirect_uris,
    })}\n`);
  });
}

main();
