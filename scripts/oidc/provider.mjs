// provider.mjs — a real OpenID provider (oidc-provider) on loopback, for the
// OAuth tests of mcpadapter/httpfront (oauth_test.go). Never a production
// configuration: clients, keys and the port come from the test.
//
//   node provider.mjs CONFIG.json
//
// CONFIG.json: {"jwks": {"keys": [private JWKs]}, "clients": [client
// metadata], "scopes": ["..."], "ttl": seconds, "autoLogin": "account"};
// without jwks it generates one P-256 key (kid "generated-1"). It listens on 127.0.0.1 on
// a free port and prints one line, {"issuer": "http://127.0.0.1:PORT"}, on
// stdout once it serves. Access tokens are JWTs (RFC 9068) whose audience
// is the resource the client asks for (RFC 8707), signed with the first
// key of the JWK Set that fits ES256.
//
// With autoLogin, the authorization endpoint's interactions (login, then
// consent) finish without a person: the user agent that follows the
// redirects (a test's OAuth client) is logged in as that account, whose
// subject (sub) is its name, and granted the scopes and resource it asked
// for. Without it there is no interaction at all: only client credentials.
//
// Commands on stdin, one a line:
//   rotate FILE.json   serve a new provider (same issuer, same port) with
//                      the JWK Set in FILE.json; prints "rotated"
// It exits when stdin closes.
import { generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createInterface } from 'node:readline';
import Provider from 'oidc-provider';

// stdout carries only this script's own lines: the provider's notices and
// warnings go to stderr.
for (const level of ['log', 'info', 'warn', 'debug']) {
  console[level] = (...args) => console.error(...args);
}

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
if (!config.jwks) {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  config.jwks = { keys: [{ ...privateKey.export({ format: 'jwk' }), kid: 'generated-1', alg: 'ES256', use: 'sig' }] };
}

function newProvider(issuer, jwks) {
  const provider = new Provider(issuer, {
    clients: config.clients,
    clientDefaults: { id_token_signed_response_alg: 'ES256' },
    jwks,
    scopes: config.scopes,
    features: {
      clientCredentials: { enabled: true },
      devInteractions: { enabled: false },
      resourceIndicators: {
        enabled: true,
        useGrantedResource: () => true,
        getResourceServerInfo: (ctx, resourceIndicator) => ({
          scope: config.scopes.join(' '),
          audience: resourceIndicator,
          accessTokenTTL: config.ttl || 600,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'ES256' } },
        }),
      },
    },
  });
  provider.on('server_error', (ctx, err) => console.error('provider server_error:', err));
  return provider;
}

// autoInteraction finishes the interaction the provider redirected the
// user agent to (interactions.url's default, /interaction/UID): a login as
// config.autoLogin, then a consent to every scope the request asked for.
async function autoInteraction(provider, req, res) {
  const { prompt: { name, details }, grantId, session, params } = await provider.interactionDetails(req, res);
  if (name === 'login') {
    await provider.interactionFinished(req, res, { login: { accountId: config.autoLogin } }, { mergeWithLastSubmission: false });
    return;
  }
  if (name !== 'consent') {
    res.writeHead(501).end(`no automatic answer to the prompt ${name}`);
    return;
  }
  const grant = grantId ? await provider.Grant.find(grantId)
    : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
  if (details.missingOIDCScope) grant.addOIDCScope(details.missingOIDCScope.join(' '));
  if (details.missingOIDCClaims) grant.addOIDCClaims(details.missingOIDCClaims);
  for (const [indicator, scopes] of Object.entries(details.missingResourceScopes || {})) {
    grant.addResourceScope(indicator, scopes.join(' '));
  }
  await provider.interactionFinished(req, res, { consent: { grantId: await grant.save() } }, { mergeWithLastSubmission: true });
}

let provider = null;
let handler = null;
const server = createServer((req, res) => {
  if (config.autoLogin && req.method === 'GET' && /^\/interaction\/[^/?]+$/.test(req.url)) {
    autoInteraction(provider, req, res).catch((err) => {
      console.error('provider interaction:', err);
      if (!res.headersSent) res.writeHead(500).end(String(err.message));
    });
    return;
  }
  handler(req, res);
});
server.listen(0, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  provider = newProvider(issuer, config.jwks);
  handler = provider.callback();
  process.stdout.write(JSON.stringify({ issuer }) + '\n');
  const rl = createInterface({ input: process.stdin });
  rl.on('line', (line) => {
    const [cmd, arg] = line.trim().split(/\s+/);
    if (cmd === 'rotate') {
      provider = newProvider(issuer, JSON.parse(readFileSync(arg, 'utf8')));
      handler = provider.callback();
      process.stdout.write('rotated\n');
    }
  });
  rl.on('close', () => { server.close(); process.exit(0); });
});
