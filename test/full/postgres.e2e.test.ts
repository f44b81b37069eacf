import { Agent } from 'node:http';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { startPostgres, type Postgres } from '../../scripts/harness.js';
import { runCli } from '../helpers/cli.js';
import { sharedPostgres, type SharedPostgres } from '../helpers/services.js';
import { deliverSigned } from '../helpers/deliver.js';
import { readText } from '../helpers/http.js';
import { startCli, type Running } from '../helpers/process.js';
import { sendJson, startServer, type TestServer } from '../helpers/server.js';

// Several `listen` processes sharing one PostgreSQL store: a database of this file's own on the run's
// server, and, for a test that restarts the server, one of the test's own (the machine's own binaries;
// .ci/run installs Debian's when there are none).

const SECRET = 'whsec_' + Buffer.alloc(32, 9).toString('base64');
let server: SharedPostgres;
let schemas = 0;
const schema = () => `e${++schemas}_${process.pid}`;

beforeAll(async () => {
  server = await sharedPostgres();
});

afterAll(async () => {
  await server?.remove();
});

/** A server of the test's own, for a test that restarts it; removed when the test ends. */
async function ownServer(): Promise<Postgres> {
  const own = await startPostgres();
  onTestFinished(() => own.remove());
  return own;
}

const deliver = (url: string, agent: Agent, trigger: string) => deliverSigned(url, agent, SECRET, trigger, { model: 'wm-6', initialization_time: '2026-11-22T00:00:00Z', forecast_hour: 0 });

interface Instance {
  proc: Running;
  url: string;
}

async function startListen(store: string, storeSchema: string, extra: string[] = [], env: Record<string, string> = {}): Promise<Instance> {
  const proc = startCli(['listen', '--port', '0', '--json', '--secret-env', 'S', '--store', store, '--store-schema', storeSchema, ...extra], { S: SECRET, ...env });
  const ready = await proc.waitFor<{ event?: string; url: string }>((v) => v.event === 'listening', 30_000);
  return { proc, url: ready.url };
}

/** An app that counts what it processed: a forward it answered, per Trigger-Id. */
async function countingApp(hold?: (trigger: string, attempt: number) => boolean): Promise<{ app: TestServer; processed: Map<string, number>; arrived: Map<string, number> }> {
  const processed = new Map<string, number>();
  const arrived = new Map<string, number>();
  const app = await startServer((req, res) => {
    const t = (req.json as { trigger_id: string }).trigger_id;
    const attempt = (arrived.get(t) ?? 0) + 1;
    arrived.set(t, attempt);
    if (hold?.(t, attempt)) return; // never answered: the forward's client goes away first
    processed.set(t, (processed.get(t) ?? 0) + 1);
    sendJson(res, 200, { ok: true });
  });
  return { app, processed, arrived };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('listen --store postgres://: several receivers, one memory', () => {
  it('three instances, each delivery sent to two of them at the same moment, 1,000 times: exactly one forwarded per pair, counted at the app', async () => {
    const { app, processed } = await countingApp();
    const s = schema();
    const instances: Instance[] = [];
    try {
      for (let i = 0; i < 3; i++) instances.push(await startListen(server.url, s, ['--forward-to', `${app.url}/hooks`]));
      const agent = new Agent({ keepAlive: true, maxSockets: 64 });
      // 1,000 races, 16 at a time over the three pairs of instances (2,000 proved the same in twice the time)
      const triggers = Array.from({ length: 1000 }, (_, i) => `trg_pair_${process.pid}_${i}`);
      const statuses = new Map<number, number>();
      let next = 0;
      const worker = async () => {
        while (next < triggers.length) {
          const i = next++;
          const t = triggers[i]!;
          const two = [instances[i % 3]!, instances[(i + 1) % 3]!];
          // both at once; then, like the service, each retries what was not acknowledged (409: in progress)
          await Promise.all(
            two.map(async (inst) => {
              for (let attempt = 0; ; attempt++) {
                const status = await deliver(inst.url, agent, t);
                statuses.set(status, (statuses.get(status) ?? 0) + 1);
                if (status >= 200 && status < 300) return;
                expect(status).toBe(409);
                expect(attempt).toBeLessThan(200);
                await sleep(10);
              }
            }),
          );
        }
      };
      await Promise.all(Array.from({ length: 16 }, worker));
      agent.destroy();
      const twice = triggers.filter((t) => processed.get(t) !== 1);
      expect(twice).toEqual([]);
      expect(processed.size).toBe(triggers.length);
      // the race was real: the second of a pair found the first's claim held, or its pair done
      expect(statuses.get(200)).toBe(2 * triggers.length);
    } finally {
      await Promise.all(instances.map((i) => i.proc.stop()));
      await app.close();
    }
    for (const i of instances) {
      expect(await i.proc.exited).toBe(130);
      expect(i.proc.stderr()).not.toContain(server.password);
    }
    const outcomes = instances.flatMap((i) => i.proc.lines.map((l) => (JSON.parse(l) as { outcome?: string }).outcome)).filter(Boolean);
    expect(outcomes.filter((o) => o === 'accepted')).toHaveLength(1000);
    expect(outcomes.filter((o) => o === 'duplicate').length).toBeGreaterThan(0);
  }, 120_000);

  it('an instance killed -9 mid-forward: its claim is taken over after the lease, and the delivery processed exactly once in the end', async () => {
    const trigger = `trg_killed_${process.pid}`;
    const { app, processed, arrived } = await countingApp((t, attempt) => t === trigger && attempt === 1);
    const s = schema();
    const lease = ['--claim-timeout', '2s', '--forward-timeout', '1500ms', '--forward-to', `${app.url}/hooks`];
    const a = await startListen(server.url, s, lease);
    const b = await startListen(server.url, s, lease);
    const agent = new Agent({ keepAlive: false });
    try {
      const first = deliver(a.url, agent, trigger);
      while (!arrived.get(trigger)) await sleep(5);
      const claimedAt = Date.now();
      a.proc.child.kill('SIGKILL');
      expect(await first).toBe(0); // never acknowledged
      expect(processed.get(trigger)).toBeUndefined();
      // the service's retry, at another instance: held while the dead claim's lease lasts
      expect(await deliver(b.url, agent, trigger)).toBe(409);
      let status = 0;
      while ((status = await deliver(b.url, agent, trigger)) === 409) await sleep(100);
      expect(status).toBe(200);
      expect(Date.now() - claimedAt).toBeGreaterThanOrEqual(1500);
      expect(processed.get(trigger)).toBe(1);
      expect(await deliver(b.url, agent, trigger)).toBe(200); // a duplicate now
      expect(processed.get(trigger)).toBe(1);
      await b.proc.waitFor<{ outcome?: string }>((v) => v.outcome === 'duplicate');
      const outcomes = b.proc.lines.map((l) => (JSON.parse(l) as { outcome?: string }).outcome);
      expect(outcomes.filter((o) => o === 'accepted')).toHaveLength(1);
      expect(outcomes.filter((o) => o === 'duplicate')).toHaveLength(1);
      expect(outcomes.filter((o) => o === 'in_progress').length).toBeGreaterThan(0);
    } finally {
      agent.destroy();
      await b.proc.stop();
      await app.close();
    }
  }, 60_000);

  it('the database restarted under load, one instance with --inspect and its stream open, one with --history (#32.2): 503s while it is away, one line each way, neither exits, nothing acknowledged without its pair stored, the count at the app exact, and the stream goes on', async () => {
    const server = await ownServer();
    const { app, processed } = await countingApp();
    const s = schema();
    const flags = ['--claim-timeout', '6s', '--forward-timeout', '2s', '--forward-to', `${app.url}/hooks`];
    const a = await startListen(server.url, s, [...flags, '--inspect', '127.0.0.1:0']);
    const b = await startListen(server.url, s, [...flags, '--history', '200']);
    const link = new URL((await a.proc.waitFor<{ event?: string; url: string }>((v) => v.event === 'inspector')).url);
    const stream = await fetch(`${link.origin}/api/events${link.search}`);
    let streamed = '';
    const { reader, streaming } = readText(stream, (text) => (streamed += text));
    const agent = new Agent({ keepAlive: true, maxSockets: 40 });
    // the restart at the 400th acknowledged, with 20 clients in flight; 500 more after it show the count exact
    // once it is back (1,500 in all showed the same in more time)
    const triggers = Array.from({ length: 900 }, (_, i) => `trg_outage_${process.pid}_${i}`);
    const acknowledged = new Set<string>();
    const statuses = new Map<number, number>();
    let restarting: Promise<void> | undefined;
    try {
      let next = 0;
      const worker = async () => {
        while (next < triggers.length) {
          const i = next++;
          const t = triggers[i]!;
          // the service's retries: until acknowledged, alternating between the instances
          for (let attempt = 0; attempt < 400; attempt++) {
            const status = await deliver([a, b][(i + attempt) % 2]!.url, agent, t);
            statuses.set(status, (statuses.get(status) ?? 0) + 1); // 0: the instance is gone
            if (status >= 200 && status < 300) {
              acknowledged.add(t);
              break;
            }
            if (a.proc.child.exitCode !== null || b.proc.child.exitCode !== null) return;
            await sleep(50);
          }
          if (acknowledged.size === 400 && !restarting) restarting = server.restart(1500);
        }
      };
      await Promise.all(Array.from({ length: 20 }, worker));
      await restarting;
      // the page's stream, fed from the database, goes on once it is back
      expect(await deliver(b.url, agent, `trg_after_${process.pid}`), b.proc.stderr()).toBe(200);
      while (!streamed.includes(`trg_after_${process.pid}`) && a.proc.child.exitCode === null) await sleep(50);
    } finally {
      agent.destroy();
      await reader.cancel().catch(() => undefined);
      await streaming;
      await a.proc.stop();
      await b.proc.stop();
      await app.close();
    }
    expect(restarting).toBeDefined();
    expect(streamed).toContain(`trg_after_${process.pid}`);
    expect([...statuses.keys()].filter((status) => ![200, 409, 503].includes(status))).toEqual([]);
    expect(statuses.get(503)).toBeGreaterThan(0);
    expect(acknowledged.size).toBe(triggers.length);
    // every acknowledged delivery's pair is stored as done, and the app processed each exactly once
    const client = new pg.Client({ connectionString: server.url });
    await client.connect();
    try {
      const { rows } = await client.query<{ trigger_id: string; state: string }>(`SELECT trigger_id, state FROM "${s}".pairs`);
      const done = new Set(rows.filter((r) => r.state === 'done').map((r) => r.trigger_id));
      expect(triggers.filter((t) => !done.has(t))).toEqual([]);
    } finally {
      await client.end();
    }
    expect(triggers.filter((t) => processed.get(t) !== 1)).toEqual([]);
    for (const inst of [a, b]) {
      const events = inst.proc.lines.map((l) => (JSON.parse(l) as { event?: string }).event).filter(Boolean);
      expect(events.filter((e) => e === 'store_lost')).toHaveLength(1);
      expect(events.filter((e) => e === 'store_restored')).toHaveLength(1);
      expect(inst.proc.stderr()).not.toMatch(/Unhandled|Connection terminated unexpectedly/);
      expect(await inst.proc.exited).toBe(130);
      expect(inst.proc.lines.join('\n') + inst.proc.stderr()).not.toContain(server.password);
    }
  }, 120_000);

  it("any instance's inspector, and `deliveries --store` and `runs --store`, show every instance's deliveries", async () => {
    const s = schema();
    const a = await startListen(server.url, s, ['--inspect', '127.0.0.1:0']);
    const b = await startListen(server.url, s, ['--history', '100']);
    const agent = new Agent({ keepAlive: false });
    try {
      const link = new URL((await a.proc.waitFor<{ event?: string; url: string }>((v) => v.event === 'inspector')).url);
      const token = link.searchParams.get('token')!;
      const inspector = `${link.origin}/`;
      expect((await fetch(link)).status).toBe(200); // the link listen printed opens the page
      // the page's live stream, open before the deliveries arrive
      const stream = await fetch(`${inspector}api/events?token=${token}`);
      let streamed = '';
      const { reader, streaming } = readText(stream, (text) => (streamed += text));
      while (!streamed.includes('event: ready')) await sleep(10);
      expect(await deliver(b.url, agent, 'trg_at_b')).toBe(200);
      expect(await deliver(a.url, agent, 'trg_at_a')).toBe(200);
      expect(await deliver(a.url, agent, 'trg_at_b')).toBe(200); // a duplicate, at the other instance
      const deadline = Date.now() + 5000;
      while (!(streamed.includes('trg_at_b') && streamed.includes('trg_at_a')) && Date.now() < deadline) await sleep(50);
      expect(streamed).toContain('trg_at_b');
      expect(streamed).toContain('trg_at_a');
      await reader.cancel();
      await streaming;
      const listed = (await (await fetch(`${inspector}api/deliveries?token=${token}`)).json()) as { records: { id: number; trigger_id: string; outcome: string }[] };
      expect(listed.records.map((r) => [r.trigger_id, r.outcome])).toEqual([
        ['trg_at_b', 'accepted'],
        ['trg_at_a', 'accepted'],
        ['trg_at_b', 'duplicate'],
      ]);
      const one = (await (await fetch(`${inspector}api/deliveries/${listed.records[0]!.id}?token=${token}`)).json()) as {
        record: { body: string; headers: Record<string, string> };
        attempts: unknown[];
      };
      expect(JSON.parse(one.record.body)).toMatchObject({ trigger_id: 'trg_at_b' });
      expect(one.record.headers['webhook-signature']).toMatch(/^v1,/);
      expect(one.attempts).toHaveLength(2);
    } finally {
      agent.destroy();
      await a.proc.stop();
      await b.proc.stop();
    }

    const listed = await runCli(['deliveries', 'list', '--store', server.url, '--store-schema', s, '--json']);
    expect(listed.code).toBe(0);
    const entries = (JSON.parse(listed.stdout) as { deliveries: { trigger_id: string; outcome: string; ref: string; instance: string }[] }).deliveries;
    expect(entries.map((e) => [e.trigger_id, e.outcome])).toEqual([
      ['trg_at_b', 'verified'],
      ['trg_at_a', 'verified'],
      ['trg_at_b', 'duplicate'],
    ]);
    expect(new Set(entries.map((e) => e.instance)).size).toBe(2);
    const shown = await runCli(['deliveries', 'show', 'trg_at_a', '--store', server.url, '--store-schema', s, '--json']);
    expect(shown.code).toBe(0);
    expect(JSON.parse((JSON.parse(shown.stdout) as { body: string }).body)).toMatchObject({ trigger_id: 'trg_at_a' });
    const runs = await runCli(['runs', '--store', server.url, '--store-schema', s, '--expect-hours', '0-6/6', '--json']);
    expect(JSON.parse(runs.stdout)).toMatchObject({ runs: [{ model: 'wm-6', initialization_time: '2026-11-22T00:00:00Z', hours: [0], missing: [6], complete: false }] });
    // the app, for the replay: signed afresh, marked
    const { app, arrived } = await countingApp();
    try {
      const replayed = await runCli(['deliveries', 'replay', `${entries[1]!.ref}`, '--store', server.url, '--store-schema', s, '--to', `${app.url}/hooks`, '--secret-env', 'S'], {
        env: { S: SECRET },
      });
      expect(replayed.code).toBe(0);
      expect(arrived.get('trg_at_a')).toBe(1);
    } finally {
      await app.close();
    }
    for (const out of [listed, shown, runs]) expect(out.stdout + out.stderr).not.toContain(server.password);
  }, 60_000);
});

describe('listen --store: what is refused', () => {
  it('a malformed store URL: exit 2, before anything starts', async () => {
    for (const bad of ['postgres//nohost', 'mysql://u:p@h/db', 'postgres:///db']) {
      const r = await runCli(['listen', '--port', '0', '--secret-env', 'S', '--store', bad], { env: { S: SECRET } });
      expect(r.code, bad).toBe(2);
      expect(r.stderr).toMatch(/--store must be|--store names no host/);
    }
    const env = await runCli(['listen', '--port', '0', '--secret-env', 'S'], { env: { S: SECRET, WXHOOKS_STORE_URL: 'redis://localhost' } });
    expect(env.code).toBe(2);
  });

  it('credentials refused at start: exit 6, naming the host, never the password; the same from WXHOOKS_STORE_URL', async () => {
    const wrong = server.url.replace(server.password, 'wrong-password-7f3a');
    for (const [args, env] of [
      [['--store', wrong], {}],
      [[], { WXHOOKS_STORE_URL: wrong }],
    ] as const) {
      const r = await runCli(['listen', '--port', '0', '--secret-env', 'S', ...args], { env: { S: SECRET, ...env } });
      expect(r.code).toBe(6);
      expect(r.stderr).toContain(`127.0.0.1:${server.port}`);
      expect(r.stderr).toMatch(/password authentication failed/);
      expect(r.stderr).not.toContain('wrong-password-7f3a');
      expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
    }
  });

  it('--claim-timeout no longer than --forward-timeout: exit 2', async () => {
    const r = await runCli(['listen', '--port', '0', '--secret-env', 'S', '--store', server.url, '--claim-timeout', '5s', '--forward-timeout', '10s'], { env: { S: SECRET } });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--claim-timeout \(5s\) must be longer than --forward-timeout \(10s\)/);
  });

  it('--history without --inspect or a postgres store: exit 2', async () => {
    const r = await runCli(['listen', '--port', '0', '--secret-env', 'S', '--history', '10'], { env: { S: SECRET } });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--history and --history-size are for what --inspect keeps, or a postgres --store keeps/);
  });
});
