import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Broker } from '../../scripts/harness.js';
import { readSink } from '../../src/sinks/index.js';
import { runCli, tempDir } from '../helpers/cli.js';
import { post } from '../helpers/http.js';
import { startCli } from '../helpers/process.js';
import { signed } from '../helpers/receiver.js';
import { BROKERS, SECRET } from '../helpers/sinks.js';

// docs/streams.md's shell blocks marked as tested here, their `wxhooks` lines run as written against a
// real nats-server and redis-server (only the fixed ports and the password are swapped for the test
// brokers'; listen is given --port 0, as the README's test gives it a free port).

const GUIDE = readFileSync(resolve(import.meta.dirname, '../../docs/streams.md'), 'utf8');
const brokers = {} as Record<'nats' | 'redis', Broker>;

beforeAll(async () => {
  [brokers.nats, brokers.redis] = await Promise.all([BROKERS.nats.start(), BROKERS.redis.start()]);
}, 60_000);
afterAll(async () => {
  await Promise.all(Object.values(brokers).map((b) => b?.remove()));
});

/** A shell line's words, its quotes taken off as the shell takes them, its comment dropped. */
function words(line: string): string[] {
  const out: string[] = [];
  for (const m of line.replace(/\s#.*$/, '').matchAll(/'([^']*)'|"([^"]*)"|(\S+)/g)) out.push(m[1] ?? m[2] ?? m[3]!);
  return out;
}

/** The `wxhooks` lines of each block marked as tested by this file, in the guide's order, as argv. */
function testedBlocks(): string[][][] {
  return [...GUIDE.matchAll(/<!-- tested: test\/full\/streams-guide\.test\.ts -->\n```sh\n([\s\S]*?)```/g)].map(([, block]) =>
    block!
      .split('\n')
      .filter((l) => l.startsWith('wxhooks '))
      .map((l) => words(l).slice(1)),
  );
}

/** The guide's broker addresses and password, made the test brokers'. */
const local = (args: string[]) =>
  args.map((a) =>
    a
      .replace('127.0.0.1:4222', `127.0.0.1:${brokers.nats.port}`)
      .replace('127.0.0.1:6379', `127.0.0.1:${brokers.redis.port}`)
      .replace('wx:PASSWORD@', `wx:${brokers.nats.password}@`)
      .replace(':PASSWORD@', `:${brokers.redis.password}@`),
  );

it("the guide's listen --sink lines, then its deliveries list lines: each delivery in its stream, and listed", async () => {
  const [listens, accepting, lists] = testedBlocks();
  expect(listens).toHaveLength(2);
  expect(accepting).toHaveLength(1);
  expect(lists).toHaveLength(2);
  const env = { WX_WEBHOOK_SECRET: SECRET, WXHOOKS_CONFIG_DIR: tempDir() };
  for (const [i, args] of listens!.entries()) {
    const proc = startCli([...local(args), '--port', '0'], env);
    try {
      let at: string | undefined;
      const json = args.includes('--json');
      if (json) at = (await proc.waitFor<{ event?: string; url: string }>((v) => v.event === 'listening', 30_000)).url;
      else {
        const deadline = Date.now() + 30_000;
        while (!(at = /Listening on (\S+?),/.exec(proc.stderr())?.[1]) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25)); // waits for listen's ready line
      }
      expect(at, proc.stderr()).toBeDefined();
      const { headers, body } = signed(`trg_guide_${i}`, { secret: SECRET });
      expect((await post(at!, headers, body)).status).toBe(200);
      const sink = local(args)[args.indexOf('--sink') + 1]!;
      expect((await readSink(sink)).deliveries.map((d) => d.trigger_id)).toEqual([`trg_guide_${i}`]);
    } finally {
      await proc.stop();
    }
  }
  for (const [i, args] of lists!.entries()) {
    const r = await runCli(local(args));
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`trg_guide_${i}`);
    expect(r.stdout).not.toContain(brokers.nats.password);
    expect(r.stdout).not.toContain(brokers.redis.password);
  }
}, 90_000);

it("the guide's ?drops=accept line: a Redis set to evict is run on, and said at start", async () => {
  const [, [args]] = testedBlocks() as [string[][], string[][]];
  const { createClient } = await import('redis');
  const admin = createClient({ url: brokers.redis.url });
  await admin.connect();
  try {
    await admin.sendCommand(['CONFIG', 'SET', 'maxmemory', '64mb']);
    await admin.sendCommand(['CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lru']);
    const proc = startCli([...local(args!), '--port', '0', '--json'], { WX_WEBHOOK_SECRET: SECRET, WXHOOKS_CONFIG_DIR: tempDir() });
    try {
      await proc.waitFor<{ event?: string }>((v) => v.event === 'listening', 30_000);
      expect(proc.stderr()).toMatch(/warning: the sink .* may drop what no worker has read \(accepted with \?drops=accept\).*allkeys-lru.*CONFIG SET maxmemory-policy noeviction/);
    } finally {
      await proc.stop();
    }
    // and without ?drops=accept, refused
    const refused = await runCli(
      local(args!)
        .map((a) => a.replace('?drops=accept', ''))
        .concat(['--port', '0']),
      { env: { WX_WEBHOOK_SECRET: SECRET } },
    );
    expect(refused.code).toBe(2);
  } finally {
    await admin.sendCommand(['CONFIG', 'SET', 'maxmemory', '0']);
    await admin.quit();
  }
}, 60_000);
