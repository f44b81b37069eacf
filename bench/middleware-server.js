// A node:http server with the Node middleware of a built wxhooks (its dist/index.js, given), a handler
// that does nothing, and @opentelemetry/api present but no SDK registered: what `npm run bench middleware`
// measures against the same server of the build before the spans (BENCH_BASE). Prints its port.
import { createServer } from 'node:http';
import { pathToFileURL } from 'node:url';

const [dist, secret] = process.argv.slice(2);
const { Webhooks, createNodeMiddleware } = await import(pathToFileURL(dist).href);
const webhooks = new Webhooks({ secret });
webhooks.on('forecast_hour.available', () => undefined);
const middleware = createNodeMiddleware(webhooks, { path: '/' });
const server = createServer((req, res) => middleware(req, res));
server.listen(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
