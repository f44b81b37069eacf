// Reads the inspector's event stream as the page does, and throws it away: `node bench/sse-reader.js INSPECTOR_URL`.
// A process of its own, so that the benchmark's waiting never stops it reading.
import { request } from 'node:http';

const base = new URL(process.argv[2]);
const get = (path, onResponse) => request({ host: base.hostname, port: base.port, path, headers: { host: base.host } }, onResponse).end();

get('/', (res) => {
  let html = '';
  res.setEncoding('utf8').on('data', (d) => (html += d));
  res.on('end', () => {
    const token = JSON.parse(/<script id="config" type="application\/json">(.*?)<\/script>/.exec(html)[1]).token;
    get(`/api/events?token=${encodeURIComponent(token)}`, (stream) => {
      let bytes = 0;
      stream.on('data', (d) => (bytes += d.length));
      process.stdout.write('reading\n');
      process.on('SIGTERM', () => {
        process.stderr.write(`read ${bytes} bytes of events\n`);
        process.exit(0);
      });
    });
  });
});
