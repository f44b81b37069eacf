// A node:http server for `npm run bench octokit`: either wxhooks' Node middleware (from a built dist,
// exactly-once on with a MemoryStore, the default store) or @octokit/webhooks' createNodeMiddleware, each
// with one handler that does nothing, each answering 200 once its handler ran. `GET /cpu` answers this
// process's CPU time so far (process.cpuUsage, µs), read before and after a load: finer than /proc's
// 10 ms ticks. Prints its port.
//   node bench/octokit-server.js wxhooks|octokit DIST SECRET
import { createServer } from 'node:http';
import { pathToFileURL } from 'node:url';

const [which, dist, secret] = process.argv.slice(2);
let middleware;
if (which === 'wxhooks') {
  const { Webhooks, MemoryStore, createNodeMiddleware } = await import(pathToFileURL(dist).href);
  const webhooks = new Webhooks({ secret, store: new MemoryStore() });
  webhooks.on('forecast_hour.available', () => undefined);
  middleware = createNodeMiddleware(webhooks, { path: '/' });
} else if (which === 'octokit') {
  const { Webhooks, createNodeMiddleware } = await import('@octokit/webhooks');
  const webhooks = new Webhooks({ secret });
  webhooks.on('push', () => undefined);
  middleware = createNodeMiddleware(webhooks, { path: '/' });
} else throw new Error(`which middleware? wxhooks or octokit, not ${which}`);

const server = createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/cpu') {
    const { user, system } = process.cpuUsage();
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ us: user + system }));
    return;
  }
  middleware(req, res);
});
server.listen(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
