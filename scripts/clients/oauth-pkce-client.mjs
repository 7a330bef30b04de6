// oauth-pkce-client.mjs — the official TypeScript SDK's OAuth client
// (@modelcontextprotocol/sdk, client/auth.js through the
// StreamableHTTPClientTransport's authProvider) reaches a server whose auth
// file trusts a real OpenID provider (scripts/oidc/provider.mjs with
// autoLogin), as a person's MCP client would:
//
//   node oauth-pkce-client.mjs URL CLIENT_ID ACCOUNT WORKFLOW
//
// It connects without a token and meets the 401; the SDK follows the
// challenge to the Protected Resource Metadata (RFC 9728), finds the
// provider's metadata (RFC 8414 / OpenID discovery), and starts an
// authorization-code request with PKCE (S256) and the resource indicator
// (RFC 8707) for the pre-registered public client CLIENT_ID.
// redirectToAuthorization plays the browser: it follows the provider's
// redirects with the provider's cookies (the provider logs in ACCOUNT and
// consents without a person) until the redirect to this client's
// redirect_uri, whose code and state it takes. transport.finishAuth
// exchanges the code with the verifier; a new connection then calls
// graph_task_create in WORKFLOW, which must succeed, and in another
// workflow, which the auth file's rule for ACCOUNT's subject must refuse,
// as it must refuse graph_task_claim with a tool error and no step-up
// authorization (the rule caps the roles at submit and observe, whatever
// scopes the token carries).
// It checks that the access token is a JWT for this resource whose subject
// is ACCOUNT. Exit status 0 on success, 1 with a FAIL line otherwise.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { randomBytes } from 'node:crypto';

const [url, clientId, account, workflow] = process.argv.slice(2);
if (!workflow) {
  console.error('usage: node oauth-pkce-client.mjs URL CLIENT_ID ACCOUNT WORKFLOW');
  process.exit(2);
}
const fail = (msg) => {
  console.log(`FAIL the TypeScript SDK's OAuth client (authorization code + PKCE): ${msg}`);
  process.exit(1);
};
// The redirect_uri registered for the client at the provider: a loopback
// address no one listens on (RFC 8252 §7.3); the redirect to it is read,
// never followed.
const redirectUrl = 'http://127.0.0.1/callback';

class TestProvider {
  constructor() {
    this.expectedState = randomBytes(16).toString('hex');
    this.code = null;
    this.verifier = null;
    this.saved = null;
    this.hops = [];
    this.flows = 0;
  }
  get redirectUrl() { return redirectUrl; }
  get clientMetadata() {
    return {
      client_name: 'graph-engineering clients-check', redirect_uris: [redirectUrl],
      grant_types: ['authorization_code'], response_types: ['code'], token_endpoint_auth_method: 'none',
    };
  }
  state() { return this.expectedState; }
  clientInformation() { return { client_id: clientId }; }
  tokens() { return this.saved ?? undefined; }
  saveTokens(tokens) { this.saved = tokens; }
  saveCodeVerifier(v) { this.verifier = v; }
  codeVerifier() {
    if (!this.verifier) throw new Error('no code verifier saved');
    return this.verifier;
  }
  // The browser: follow the provider's redirects, keeping its cookies.
  async redirectToAuthorization(authorizationUrl) {
    const u = new URL(authorizationUrl);
    if (u.searchParams.get('code_challenge_method') !== 'S256' || !u.searchParams.get('code_challenge')) {
      throw new Error(`the authorization request carries no S256 code challenge: ${u}`);
    }
    if (!u.searchParams.get('resource')) {
      throw new Error(`the authorization request names no resource (RFC 8707): ${u}`);
    }
    this.flows++;
    const cookies = new Map();
    let next = u;
    for (let hop = 0; hop < 10; hop++) {
      if (next.href.startsWith(redirectUrl)) {
        if (next.searchParams.get('error')) {
          throw new Error(`the provider refused: ${next.searchParams.get('error')}: ${next.searchParams.get('error_description')}`);
        }
        if (next.searchParams.get('state') !== this.expectedState) throw new Error('the redirect carries another state');
        this.code = next.searchParams.get('code');
        if (!this.code) throw new Error(`the redirect carries no code: ${next}`);
        return;
      }
      this.hops.push(next.pathname.replace(/\/[^/]{16,}$/, '/UID'));
      const res = await fetch(next, {
        redirect: 'manual',
        headers: { cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join('; ') },
      });
      for (const c of res.headers.getSetCookie()) {
        const [pair] = c.split(';');
        const i = pair.indexOf('=');
        cookies.set(pair.slice(0, i).trim(), pair.slice(i + 1).trim());
      }
      const location = res.headers.get('location');
      if (res.status < 300 || res.status >= 400 || !location) {
        throw new Error(`${next.pathname} answered ${res.status} without a redirect: ${(await res.text()).slice(0, 400)}`);
      }
      next = new URL(location, next);
    }
    throw new Error(`more than 10 redirects: ${this.hops.join(' -> ')}`);
  }
}

const auth = new TestProvider();
const first = new StreamableHTTPClientTransport(new URL(url), { authProvider: auth });
const client = new Client({ name: 'clients-check-oauth-pkce', version: '1.0.0' });
try {
  await client.connect(first);
  fail('the server accepted a connection without a token');
} catch (err) {
  if (!(err instanceof UnauthorizedError)) fail(`the first connection failed otherwise than with a 401: ${err.stack || err}`);
}
if (!auth.code) fail('the SDK did not start an authorization request');
await first.finishAuth(auth.code);
const tokens = auth.tokens();
if (!tokens?.access_token) fail('the code exchange saved no access token');
let claims;
try {
  claims = JSON.parse(Buffer.from(tokens.access_token.split('.')[1], 'base64url').toString());
} catch (err) {
  fail(`the access token is not a JWT: ${err}`);
}
if (claims.sub !== account) fail(`the access token's subject is ${JSON.stringify(claims.sub)}, not ${account}`);
if (claims.aud !== url && !(Array.isArray(claims.aud) && claims.aud.includes(url))) {
  fail(`the access token's audience is ${JSON.stringify(claims.aud)}, not ${url}`);
}

const hops = auth.hops.join(' -> ');
if (auth.flows !== 1) fail(`the SDK started ${auth.flows} authorization requests for one 401`);

const authed = new Client({ name: 'clients-check-oauth-pkce', version: '1.0.0' });
await authed.connect(new StreamableHTTPClientTransport(new URL(url), { authProvider: auth }));
const created = await authed.callTool({ name: 'graph_task_create', arguments: { workflow_id: workflow, node_id: 'a' } });
if (created.isError || created.structuredContent?.task?.state !== 'pending') {
  fail(`graph_task_create in ${workflow}: ${JSON.stringify(created)}`);
}
const elsewhere = await authed.callTool({ name: 'graph_task_create', arguments: { workflow_id: 'not-granted', node_id: 'a' } });
if (!elsewhere.isError) fail(`graph_task_create outside the workflows of ${account}'s rule succeeded: ${JSON.stringify(elsewhere)}`);
// The provider granted every scope the SDK asked for (the metadata's
// scopes_supported); the rule caps its roles at submit and observe, so the
// claim is a tool error, not a 403 insufficient_scope on which the SDK
// would start a step-up authorization no token could satisfy.
let claimed;
try {
  claimed = await authed.callTool({ name: 'graph_task_claim', arguments: { owner: account, workflow_id: workflow } });
} catch (err) {
  claimed = { isError: true, error: String(err) };
}
if (!claimed.isError) fail(`graph_task_claim succeeded, but ${account}'s rule caps the roles at submit and observe: ${JSON.stringify(claimed)}`);
if (claimed.error || auth.flows !== 1) {
  fail(`graph_task_claim, whose role the rule caps, was not a tool error (${JSON.stringify(claimed)}; authorization requests: ${auth.flows})`);
}
await authed.close();
console.log(`PASS the TypeScript SDK's OAuth client meets the 401, finds the provider, gets a code with PKCE (${hops}), exchanges it and creates a task as ${account}'s principal, in its workflows and roles only`);
