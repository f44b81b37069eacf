// The relay's file store alone (src/relay/file-storage.ts), in this process, as a drain uses it: N
// deliveries appended 16 at a time, then read with a window of 64 and acknowledged ACK at a time (each
// acknowledgement a `remove`, then a `read` of what the window has room for). Prints the rate and the
// process's CPU a delivery (user + system, the thread pool's included), with the copy in memory and
// without (every read from the files: after a restart, or past the copy's budget). Not a test:
//   node bench/relay-storage.js [N=10000] [ACK=4]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileRelayStorage } from '../dist/relay/file-storage.js';

const N = Number(process.argv[2] ?? 10000);
const ACK = Number(process.argv[3] ?? 4);
const WINDOW = 64;
const headers = [
  ['content-type', 'application/json'],
  ['webhook-id', 'msg_abcdefabcdef'],
  ['webhook-timestamp', '1764000000'],
  ['webhook-signature', `v1,${'a'.repeat(44)}`],
  ['trigger-id', 'trg_0123456789'],
  ['host', '127.0.0.1:1234'],
];
const body = Buffer.from(JSON.stringify({ type: 'forecast_hour.available', webhook_id: '1', subscription_id: '1', trigger_id: 'trg_x', test: false, data: { model: 'wm-6', forecast_hour: 3 } }));
const size = headers.reduce((n, [k, v]) => n + k.length + v.length + 4, body.length);
const cpu = (since) => {
  const u = process.cpuUsage(since);
  return u.user + u.system;
};

for (const memoryBytes of [undefined, 0]) {
  const dir = mkdtempSync(join(tmpdir(), 'wxhooks-bench-relay-storage-'));
  try {
    const s = await FileRelayStorage.open({ dir, memoryBytes });
    const now = Date.now();
    await s.saveChannel({ name: 'c', secrets: ['x'], temporary: false, createdAt: now, lastSeenAt: now, nextSeq: 1 });
    let seq = 1;
    let t = performance.now();
    let c = process.cpuUsage();
    for (let i = 0; i < N; i += 16) {
      const batch = [];
      for (let j = 0; j < 16 && i + j < N; j++) batch.push({ seq: seq++, receivedAt: now, headers, body, size });
      await s.append('c', batch, seq);
    }
    const fill = { rps: N / ((performance.now() - t) / 1000), us: cpu(c) / N };
    t = performance.now();
    c = process.cpuUsage();
    const inflight = [];
    let lastSent = 0;
    const take = (ds) => ds.forEach((d) => (inflight.push(d.seq), (lastSent = d.seq)));
    take(await s.read('c', 0, WINDOW, 8 << 20));
    while (inflight.length) {
      await s.remove('c', inflight.splice(0, ACK));
      take(await s.read('c', lastSent, WINDOW - inflight.length, 8 << 20));
    }
    const drain = { rps: N / ((performance.now() - t) / 1000), us: cpu(c) / N };
    await s.close();
    const copy = memoryBytes === 0 ? 'no copy in memory' : 'copy in memory (default)';
    console.log(
      `${copy}: appended ${fill.rps.toFixed(0)}/s, ${fill.us.toFixed(0)} µs CPU a delivery; drained (ack ${ACK} at a time) ${drain.rps.toFixed(0)}/s, ${drain.us.toFixed(0)} µs CPU a delivery`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
