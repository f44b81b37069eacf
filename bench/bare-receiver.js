// The floor for `listen`: a bare node:http server doing the same work per delivery (read the raw body,
// HMAC-SHA256 over "id.timestamp.body" with the decoded whsec_ key, constant-time compare, JSON.parse).
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';

const key = Buffer.from(process.argv[2].slice(6), 'base64');
const server = createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    const id = req.headers['trigger-id'];
    const ts = req.headers['webhook-timestamp'];
    const expected = createHmac('sha256', key).update(`${id}.${ts}.`).update(body).digest();
    const given = Buffer.from(String(req.headers['webhook-signature']).slice(3), 'base64');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      res.writeHead(401).end();
      return;
    }
    JSON.parse(body.toString('utf8'));
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
  });
});
server.listen(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
