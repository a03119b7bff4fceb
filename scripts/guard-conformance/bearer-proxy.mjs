// A local HTTP forwarder that adds `Authorization: Bearer <token>` to every
// request and passes everything else through unchanged, both ways, streams
// included (the Host header too, so the guard sees the host the client
// addressed, as behind any reverse proxy that preserves it). The official conformance suite's server scenarios connect
// without credentials; the guard's endpoint requires a tenant's token. This
// stands in for the client's own authorization and changes nothing else.
//
//   node bearer-proxy.mjs <listen port> <target URL> <token>
// Prints the port once listening.
import { createServer, request } from "node:http";

const [port, target, token] = process.argv.slice(2);
const base = new URL(target);

const server = createServer((req, res) => {
  const headers = { ...req.headers, authorization: `Bearer ${token}` };
  const up = request(
    { hostname: base.hostname, port: base.port, path: base.pathname, method: req.method, headers },
    (upRes) => {
      res.writeHead(upRes.statusCode ?? 502, upRes.headers);
      // An event stream's head goes out at once, as the guard sent it, not
      // with the stream's first event (which may be long in coming).
      res.flushHeaders();
      upRes.pipe(res);
    },
  );
  up.on("error", (e) => {
    if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" });
    res.end(String(e));
  });
  req.pipe(up);
  res.on("close", () => up.destroy());
});
server.listen(Number(port), "127.0.0.1", () => console.log(server.address().port));
