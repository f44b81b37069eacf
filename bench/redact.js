// redact() (src/util/redact.ts) on a log line and on an MCP answer's body, with the same four values
// registered (a whsec_ secret, a wb_ key, a 32-character key, a 36-character token), three rounds. Given
// two built checkouts, each is timed in this one process, in turns (a change to the redaction against the
// code before it); given one, that one alone. Not a test:
//   node bench/redact.js DIST [OTHER_DIST]     (DIST: a built checkout's dist/, such as ./dist)
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const dists = process.argv.slice(2);
if (dists.length === 0 || dists.length > 2) {
  console.error('usage: node bench/redact.js DIST [OTHER_DIST]');
  process.exit(2);
}
const builds = await Promise.all(dists.map(async (d) => ({ name: d, ...(await import(pathToFileURL(resolve(d, 'util/redact.js')).href)) })));

const key = Buffer.alloc(32).map((_, i) => (i * 37 + 11) & 255);
const values = [
  `whsec_${Buffer.from(key).toString('base64')}`,
  `wb_${Buffer.from('acme:0123456789abcdef0123456789abcdef').toString('base64')}`,
  '0123456789abcdef0123456789abcdef',
  `tok_${'q'.repeat(32)}`,
];
for (const b of builds) for (const v of values) b.addSensitive(v);

const line =
  '{"time":"2026-11-28T01:53:16.123Z","event":"delivery","outcome":"accepted","status":200,"type":"forecast_hour.available","trigger_id":"trg_00mwzraf7i6903f68e443b51d7","subscription_id":"1","webhook_id":"1","model":"wm-6","channel":"wh-7f3a9c0b1d2e"}';
const body = JSON.stringify({ data: { response: Array.from({ length: 200 }, (_, i) => ({ lat: i, lon: -i, t2m: 280 + i / 10 })) } }).slice(0, 16384);

/** Microseconds a call, after a tenth as many calls to warm up. */
const time = (f, text, n) => {
  for (let i = 0; i < n / 10; i++) f(text);
  const t = process.hrtime.bigint();
  for (let i = 0; i < n; i++) f(text);
  return Number(process.hrtime.bigint() - t) / n / 1000;
};

for (let round = 1; round <= 3; round++) {
  const cells = builds.map((b) => `${b.name}: ${time(b.redact, line, 20000).toFixed(2)} µs a ${line.length}-character line, ${time(b.redact, body, 500).toFixed(1)} µs a ${body.length}-byte body`);
  console.log(`round ${round}: ${cells.join('; ')}`);
}
