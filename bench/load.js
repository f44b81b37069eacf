// The benchmark's load generator, run as its own process:
//   node bench/load.js PORT[,PORT...] SECRET COUNT CLIENTS [WARMUP] [--tag T] [--offset K] [--retry-409] [--path /in/CHANNEL] [--github] [--no-forecast]
// With several ports, client i sends to port (i + K) mod n. --tag names the deliveries (two generators
// with one tag send the same ones); --retry-409 sends a request answered 409 (held by a claim) or 503
// again after 5 ms, as the service would later, and counts it in `retries`, not `failures`. --github signs
// the same bodies the way GitHub does (X-Hub-Signature-256: sha256=HMAC(secret, body), X-GitHub-Event
// push, the Trigger-Id as X-GitHub-Delivery), for @octokit/webhooks' middleware. --no-forecast
// sends bodies that name no forecast (no model, no run). Plain sockets with every request pre-built as bytes, one request at a time per connection (no
// pipelining): it costs the machine far less per request than an HTTP client library, so what is measured
// is the server. Prints one JSON line: {"rps", "p50", "p99", "failures"} (latencies in milliseconds).
import { createHmac } from 'node:crypto';
import { connect } from 'node:net';
import { signDelivery } from '../dist/index.js';

const positional = [];
const flags = {};
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i];
  if (a === '--retry-409') flags.retry = true;
  else if (a === '--github') flags.github = true;
  else if (a === '--no-forecast') flags.noForecast = true;
  else if (a === '--tag' || a === '--offset' || a === '--path') flags[a.slice(2)] = process.argv[++i];
  else positional.push(a);
}
const [port, secret, count, clients, warmup = '200'] = positional;
const PORTS = port.split(',').map(Number);
const OFFSET = Number(flags.offset ?? 0);

/** `n` signed deliveries as raw HTTP/1.1 requests, each with its own Trigger-Id. */
function requests(n, tag) {
  const ts = Math.floor(Date.now() / 1000);
  return Array.from({ length: n }, (_, i) => {
    const trigger = `trg_bench_${tag}_${i}`;
    const body = Buffer.from(
      JSON.stringify({
        type: 'forecast_hour.available',
        webhook_id: '1',
        subscription_id: '1',
        trigger_id: trigger,
        test: false,
        // each delivery of a forecast of its own, as the service sends them (a forecast hour once per run and
        // subscription; its retries keep their trigger): the tag in the model, so no two runs of the generator
        // name one forecast. --no-forecast: a body that names none (no model, no run), so no forecast pair is
        // claimed beside the delivery's.
        data: flags.noForecast ? { forecast_hour: i } : { model: `wm-6-${tag}`, initialization_time: '2026-11-21T00:00:00Z', forecast_hour: i },
      }),
    );
    const signed = flags.github
      ? { 'x-github-event': 'push', 'x-github-delivery': trigger, 'x-hub-signature-256': `sha256=${createHmac('sha256', secret).update(body).digest('hex')}` }
      : signDelivery({ secret, body, triggerId: trigger, timestamp: ts });
    const head =
      `POST ${flags.path ?? '/'} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n` +
      Object.entries(signed)
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('') +
      '\r\n';
    return Buffer.concat([Buffer.from(head, 'latin1'), body]);
  });
}

/** One keep-alive connection sending its share of the requests one after another. */
function client(port, queue, latencies, counts) {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let current;
    socket.setNoDelay(true);
    let pending = Buffer.alloc(0);
    let sentAt = 0n;
    const sendNext = () => {
      const req = (current = queue.pop());
      if (!req) {
        socket.end();
        resolve();
        return;
      }
      sentAt = process.hrtime.bigint();
      socket.write(req);
    };
    socket.on('connect', sendNext);
    socket.on('data', (chunk) => {
      pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
      for (;;) {
        const end = pending.indexOf('\r\n\r\n');
        if (end === -1) return;
        const head = pending.toString('latin1', 0, end);
        const length = /\r\ncontent-length: *(\d+)/i.exec(head);
        let total;
        if (length) total = end + 4 + Number(length[1]);
        else if (/\r\ntransfer-encoding: *chunked/i.test(head)) {
          // small bodies only: the response ends at the last, empty chunk
          const last = pending.indexOf('0\r\n\r\n', end + 4);
          total = last === -1 ? Infinity : last + 5;
        } else {
          reject(new Error(`a response with no length: ${head.split('\r\n')[0]}`));
          socket.destroy();
          return;
        }
        if (pending.length < total) return;
        pending = pending.subarray(total);
        if (flags.retry && (head.slice(9, 12) === '409' || head.slice(9, 12) === '503')) {
          counts.retries++;
          setTimeout(() => socket.write(current), 5);
          continue;
        }
        latencies.push(Number(process.hrtime.bigint() - sentAt) / 1e6);
        if (head.slice(9, 12) !== '200') {
          counts.failures++;
          counts.statuses[head.slice(9, 12)] = (counts.statuses[head.slice(9, 12)] ?? 0) + 1;
        }
        sendNext();
      }
    });
    socket.on('error', reject);
  });
}

async function run(n, tag) {
  const queue = requests(n, tag).reverse();
  const latencies = [];
  const counts = { failures: 0, retries: 0, statuses: {} };
  const started = process.hrtime.bigint();
  await Promise.all(Array.from({ length: Number(clients) }, (_, i) => client(PORTS[(i + OFFSET) % PORTS.length], queue, latencies, counts)));
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  latencies.sort((a, b) => a - b);
  const at = (p) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))];
  return { rps: n / seconds, p50: at(50), p99: at(99), failures: counts.failures, statuses: counts.statuses, retries: counts.retries };
}

if (Number(warmup) > 0) await run(Number(warmup), `warmup_${process.pid}`);
process.stdout.write(`${JSON.stringify(await run(Number(count), flags.tag ?? `measured_${process.pid}`))}\n`);
