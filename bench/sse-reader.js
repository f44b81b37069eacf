// Reads the inspector's event stream as the page does, and throws it away: `node bench/sse-reader.js LINK`,
// the link `listen --inspect` prints (with its token). A process of its own, so that the benchmark's
// waiting never stops it reading.
import { request } from 'node:http';

const link = new URL(process.argv[2]);
const token = link.searchParams.get('token');
request({ host: link.hostname, port: link.port, path: `/api/events?token=${encodeURIComponent(token)}`, headers: { host: link.host } }, (stream) => {
  let bytes = 0;
  stream.on('data', (d) => (bytes += d.length));
  process.stdout.write('reading\n');
  process.on('SIGTERM', () => {
    process.stderr.write(`read ${bytes} bytes of events\n`);
    process.exit(0);
  });
}).end();
