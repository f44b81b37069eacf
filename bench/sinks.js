// `npm run bench -- sinks`: the sinks (#37) against NATS JetStream and Redis, each started from the machine's
// binaries by scripts/harness.js. Publishing is measured against a floor of the same client publishing
// the same bytes its own documented way, one acknowledged message at a time (nats.js's `js.publish` with
// the same Nats-Msg-Id and headers; node-redis's XADD of the same fields, with no dedupe at all), in turns
// in the same run: what anyone would write by hand, and what the sink must not fall below for its
// guarantees. Consumers are measured against one worker.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { eachLine, startNats, startRedis } from '../scripts/harness.js';
import { encodeMessage, openSink, parseSinkUrl } from '../dist/sinks/index.js';

const ROOT = new URL('..', import.meta.url).pathname;

/** A delivery of about the size the service sends for a forecast hour without a response (600 bytes). */
function deliveryOf(i, tag) {
  const trigger = `trg_bench_${tag}_${i}`;
  const body = Buffer.from(
    JSON.stringify({
      type: 'forecast_hour.available',
      webhook_id: '1',
      subscription_id: '7',
      trigger_id: trigger,
      created_at: '2026-11-21T06:04:00Z',
      test: false,
      data: { model: 'wm-6', initialization_time: '2026-11-21T00:00:00Z', forecast_hour: i % 240, pad: 'x'.repeat(400) },
    }),
  );
  return {
    trigger,
    subscription: '7',
    source: 'body',
    type: 'forecast_hour.available',
    layout: 'standard',
    timestamp: 1795500000,
    secretIndex: 0,
    receivedAt: '2026-11-21T06:04:00.123Z',
    headers: {
      'content-type': 'application/json',
      'trigger-id': trigger,
      'webhook-timestamp': '1795500000',
      'webhook-signature': 'v1,K6WnbTTx0dTkxTMNDkcp0cTqkN2e2ZD3BEyVSWaRr3E=',
      host: '127.0.0.1:8787',
      'content-length': String(body.length),
    },
    body,
  };
}

/** Runs `send` over the list, `inflight` at a time; resolves with deliveries a second. */
async function rate(list, inflight, send) {
  let next = 0;
  const t = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: inflight }, async () => {
      while (next < list.length) await send(list[next++]);
    }),
  );
  return list.length / (Number(process.hrtime.bigint() - t) / 1e9);
}

/** The bare operation of each broker's client on the same bytes: a JetStream publish with the same headers and Nats-Msg-Id; an XADD of the same fields. */
async function bareClient(kind, url) {
  const t = parseSinkUrl(url);
  if (kind === 'nats') {
    const { connect, headers } = await import('@nats-io/transport-node');
    const { jetstream } = await import('@nats-io/jetstream');
    const nc = await connect({ servers: `${t.host}:${t.port}`, user: t.username, pass: t.password });
    const js = jetstream(nc);
    return {
      prepare: (d) => {
        const m = encodeMessage(d);
        const h = headers();
        for (const [k, v] of m.fields) h.set(k, v);
        return { key: m.key, h, body: m.body };
      },
      send: (p) => js.publish(t.name, p.body, { msgID: p.key, headers: p.h }),
      close: () => nc.close(),
    };
  }
  const { createClient } = await import('redis');
  const client = createClient({ socket: { host: t.host, port: t.port }, password: t.password });
  await client.connect();
  return {
    prepare: (d) => {
      const m = encodeMessage(d);
      return ['XADD', t.name, '*', ...m.fields.flat(), 'body', Buffer.from(m.body)];
    },
    send: (args) => client.sendCommand(args),
    close: () => client.close(),
  };
}

/** Starts `count` consumer processes of a new group; resolves with the seconds until they had handled `total` between them. */
async function consumeAll(url, group, count, total) {
  const children = [];
  const handled = new Array(count).fill(0);
  let done;
  const finished = new Promise((resolve) => (done = resolve));
  const ready = [];
  for (let i = 0; i < count; i++) {
    const child = spawn(process.execPath, [join(ROOT, 'bench/sink-consumer.js'), url, group, '32'], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    ready.push(
      new Promise((resolve) =>
        eachLine(child.stdout, (line) => {
          if (line === 'ready') return resolve();
          handled[i] = Number(line);
          if (handled.reduce((a, b) => a + b, 0) >= total) done(process.hrtime.bigint());
        }),
      ),
    );
  }
  // the clock starts when the last worker reads: a process's start-up is not the consumers' throughput
  await Promise.all(ready);
  const started = process.hrtime.bigint();
  const ended = await finished;
  await Promise.all(
    children.map(
      (c) =>
        new Promise((r) => {
          if (c.exitCode !== null) return r();
          c.once('exit', r);
          c.kill('SIGTERM');
        }),
    ),
  );
  return Number(ended - started) / 1e9;
}

/** An app that answers every POST at once, `{"ok":true}`, in a process of its own: what `listen --forward-to` is measured against. */
async function startInstantApp() {
  const code = `const s = require('node:http').createServer((req, res) => { req.resume(); req.on('end', () => { res.writeHead(200, { 'content-type': 'application/json', 'content-length': 11 }); res.end('{"ok":true}'); }); }); s.keepAliveTimeout = 10000; s.listen(0, '127.0.0.1', () => console.log(s.address().port));`;
  const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise((resolve, reject) => {
    eachLine(child.stdout, (line) => resolve(line.trim()));
    child.on('exit', (c) => reject(new Error(`the app exited ${c}`)));
  });
  return { child, url: `http://127.0.0.1:${port}/hooks` };
}

/**
 * `listen --sink URL` against `listen --forward-to` an app that answers at once, at 50 clients, in turns
 * in the same run (the target: at least 0.7×). Both are fresh processes in folders of their own,
 * warmed alike; each cycle measures one then the other, the order turning, and the ratio is taken per cycle.
 */
async function listenSinkVsForward({ row, log, median, QUICK, atLeast, listenAt }, kind, broker, name) {
  const { startListen, load, stop, benchDir, cleanEnv, generateSecret } = listenAt;
  const secret = generateSecret();
  const cycles = QUICK ? 3 : 10;
  const WARM = QUICK ? 5000 : 20000;
  const MANY = QUICK ? 2000 : 5000;
  const app = await startInstantApp();
  const started = {};
  try {
    for (const [label, flags] of [
      ['forward', ['--forward-to', app.url]],
      ['sink', ['--sink', `${broker.url}/${name}${kind === 'nats' ? '_listen' : ':listen'}`]],
    ]) {
      const dir = benchDir();
      const l = await startListen(cleanEnv({ WXHOOKS_CONFIG_DIR: dir, BENCH_SECRET: secret }), dir, flags);
      started[label] = { child: l.child, port: new URL(l.url).port };
    }
    const at = (label, count) => load(started[label].child.pid, started[label].port, secret, count, 50);
    log(`sinks, ${kind}: listen --sink against listen --forward-to (an app that answers at once), ${WARM} to warm each, then ${cycles} cycles of ${MANY} at 50 clients, in turns`);
    at('forward', WARM);
    at('sink', WARM);
    const rps = { forward: [], sink: [] };
    const cpu = { forward: [], sink: [] };
    const ratios = [];
    for (let c = 0; c < cycles; c++) {
      const order = c % 2 ? ['sink', 'forward'] : ['forward', 'sink'];
      const got = {};
      for (const label of order) got[label] = at(label, MANY);
      for (const label of order) {
        rps[label].push(got[label].rps);
        if (got[label].cpuUs !== undefined) cpu[label].push(got[label].cpuUs);
      }
      ratios.push(got.sink.rps / got.forward.rps);
      log(`  cycle ${c + 1}: --sink ${got.sink.rps.toFixed(0)}/s, --forward-to ${got.forward.rps.toFixed(0)}/s: ${(got.sink.rps / got.forward.rps).toFixed(2)}×`);
    }
    row(
      'sinks',
      `${kind}: \`listen --sink\` deliveries/s at 50 clients (against \`listen --forward-to\` an app that answers at once)`,
      `${Math.round(median(rps.sink))}/s`,
      `${Math.round(median(rps.forward))}/s`,
      median(ratios),
      atLeast(0.7),
    );
    if (cpu.sink.length && cpu.forward.length) log(`  listen's CPU a delivery: --sink ${median(cpu.sink).toFixed(1)} µs, --forward-to ${median(cpu.forward).toFixed(1)} µs`);
  } finally {
    for (const s of Object.values(started)) await stop(s.child);
    await stop(app.child);
  }
}

export async function sinks({ row, log, median, QUICK, atLeast, listenAt }) {
  const N = QUICK ? 3000 : 10000;
  const rounds = QUICK ? 2 : 5;
  for (const [kind, start, name, target] of [
    // the sink answers a turn's publishes together (one script call with Redis; one reply subscription with
    // NATS), which the bare client does not: at least the floor's rate
    ['nats', startNats, 'bench.deliveries', 1.0],
    ['redis', startRedis, 'bench:deliveries', 1.0],
  ]) {
    const broker = await start();
    const url = `${broker.url}/${name}`;
    try {
      if (listenAt) await listenSinkVsForward({ row, log, median, QUICK, atLeast, listenAt }, kind, broker, name);
      log(`sinks, ${kind}: ${rounds} rounds of ${N} publishes, 64 in flight, in turns with the bare client`);
      const sink = await openSink(url);
      const bare = await bareClient(kind, url);
      const ours = [];
      const floor = [];
      const ratios = [];
      try {
        for (let r = 0; r < rounds; r++) {
          const prepared = Array.from({ length: N }, (_, i) => bare.prepare(deliveryOf(i, `floor${r}`)));
          const f = await rate(prepared, 64, (p) => bare.send(p));
          const o = await rate(
            Array.from({ length: N }, (_, i) => deliveryOf(i, `ours${r}`)),
            64,
            (d) => sink.publish(d),
          );
          floor.push(f);
          ours.push(o);
          ratios.push(o / f);
          log(`  round ${r + 1}: sink ${o.toFixed(0)}/s, bare ${f.toFixed(0)}/s: ${(o / f).toFixed(2)}×`);
        }
      } finally {
        await sink.close();
        await bare.close();
      }
      const what = kind === 'nats' ? 'a bare JetStream publish of the same bytes with the same Nats-Msg-Id and headers' : 'a bare XADD of the same fields (no dedupe key)';
      row(
        'sinks',
        `${kind}: publishes/s, 64 in flight, 600-byte deliveries, each acknowledged (against ${what}, same client)`,
        `${Math.round(median(ours))}/s`,
        `${Math.round(median(floor))}/s`,
        median(ratios),
        atLeast(target),
      );

      // consumers: the N messages of a stream of their own, read by a new group each time, with 1, 2 and 4 worker processes
      const consumed = `${broker.url}/${name}${kind === 'nats' ? '_consumed' : ':consumed'}`;
      const feed = await openSink(consumed);
      await rate(
        Array.from({ length: N }, (_, i) => deliveryOf(i, 'consume')),
        64,
        (d) => feed.publish(d),
      );
      await feed.close();
      const per = { 1: [], 2: [], 4: [] };
      log(`sinks, ${kind}: ${N} messages read by 1, 2 and 4 workers (a new group each time), ${QUICK ? 1 : 3} rounds`);
      for (let r = 0; r < (QUICK ? 1 : 3); r++) {
        for (const workers of [1, 2, 4]) per[workers].push(N / (await consumeAll(consumed, `g${r}_${workers}`, workers, N)));
      }
      for (const workers of [1, 2, 4]) {
        const m = median(per[workers]);
        row(
          'sinks',
          `${kind}: messages/s consumed and acknowledged by ${workers} worker${workers === 1 ? '' : 's'} (processes, 32 in flight each, a handler that returns at once)`,
          `${Math.round(m)}/s`,
          workers === 1 ? '' : `${Math.round(median(per[1]))}/s (1 worker)`,
          workers === 1 ? undefined : m / median(per[1]),
        );
      }
    } finally {
      await broker.remove();
    }
  }
}
