// A real OAuth 2.0 / OpenID Connect authorization server (npm
// `oidc-provider`) on loopback, for the scope service's end-to-end tests:
// PKCE S256 required, RFC 8707 resource indicators, the library's own
// development login and consent pages (devInteractions).
//
//   node server.mjs --port 0 --redirect http://127.0.0.1:9/callback
//
// Prints the port alone on its first line once it listens. Not for
// production: devInteractions accepts any login.
//
// With --console-redirect <uri> --console-resource <audience> it also
// knows Pinfold's review console as a client (`pinfold-console`, secret
// `pinfold-console-test-secret-0123456789`, that redirect URI), and issues
// it a JWT access token (RS256, the provider's JWKS at /jwks) whose
// audience is that resource when asked for it with scope `pinfold`: the
// token Pinfold verifies as it does any bearer token (claim rules map the
// subject to a tenant and roles).
//
// GET /test/token-requests lists what each token request carried (its
// grant_type and RFC 8707 resource, and whether a token was issued), so a
// test can check that a client sent the resource in the token request as
// well as in the authorization request, as the MCP authorization
// specification requires: with the resource left out, this provider would
// still fall back to the one granted at authorization, and the issued
// token would not show the difference.
import http from 'node:http';
import Provider from 'oidc-provider';

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

const port = Number(arg('port', '0'));
const redirect = arg('redirect', 'http://127.0.0.1:9/callback');
// Scopes the protected MCP server (the RFC 8707 resource) accepts.
const resourceScopes = arg('scopes', 'notes:read notes:write notes:admin');
const consoleRedirect = arg('console-redirect', '');
const consoleResource = arg('console-resource', '');

// The test reads the first line only: never die writing to a closed pipe.
process.stdout.on('error', () => {});

const server = http.createServer();
server.listen(port, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: 'pinfold',
        client_secret: 'pinfold-test-client-secret-0123456789',
        redirect_uris: [redirect],
        grant_types: ['authorization_code'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_basic',
      },
      ...(consoleRedirect
        ? [
            {
              client_id: 'pinfold-console',
              client_secret: 'pinfold-console-test-secret-0123456789',
              redirect_uris: [consoleRedirect],
              grant_types: ['authorization_code'],
              response_types: ['code'],
              token_endpoint_auth_method: 'client_secret_basic',
            },
          ]
        : []),
    ],
    pkce: { required: () => true },
    scopes: ['openid', 'offline_access'],
    cookies: { keys: ['pinfold-test-cookie-key-not-a-secret'] },
    findAccount: async (_ctx, sub) => ({
      accountId: sub,
      async claims() {
        return { sub };
      },
    }),
    features: {
      devInteractions: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => undefined,
        useGrantedResource: () => true,
        getResourceServerInfo: async (_ctx, resource) =>
          consoleResource && resource === consoleResource
            ? {
                scope: 'pinfold',
                audience: consoleResource,
                accessTokenFormat: 'jwt',
                accessTokenTTL: 600,
                jwt: { sign: { alg: 'RS256' } },
              }
            : {
                scope: resourceScopes,
                accessTokenFormat: 'opaque',
                accessTokenTTL: 600,
              },
      },
    },
  });
  provider.on('server_error', (_ctx, err) => console.error('server_error', err));
  const tokenRequests = [];
  const record = (outcome) => (ctx) => {
    const params = (ctx.oidc && ctx.oidc.params) || {};
    tokenRequests.push({
      outcome,
      grant_type: params.grant_type ?? null,
      resource: params.resource ?? null,
    });
  };
  provider.on('grant.success', record('issued'));
  provider.on('grant.error', record('refused'));
  const callback = provider.callback();
  server.on('request', (req, res) => {
    if (req.method === 'GET' && req.url === '/test/token-requests') {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(tokenRequests));
      return;
    }
    callback(req, res);
  });
  console.log(String(server.address().port));
});
