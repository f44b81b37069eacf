import { watch, writeFileSync, readdirSync, statSync } from 'node:fs';
import { Agent } from 'node:http';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FilePairStore } from '../src/store/file-pairs.js';
import { tempDir } from './helpers/cli.js';
import { deliverSigned } from './helpers/deliver.js';
import { startCli, type Running } from './helpers/process.js';
import { sendJson, startServer } from './helpers/server.js';

const SECRET = 'whsec_' + Buffer.alloc(32, 7).toString('base64');

const deliver = (url: string, agent: Agent, trigger: string) => deliverSigned(url, agent, SECRET, trigger);

async function startListen(dir: string, appUrl: string): Promise<{ proc: Running; url: string }> {
  const proc = startCli(['listen', '--port', '0', '--json', '--secret-env', 'S', '--forward-to', appUrl], { WXHOOKS_CONFIG_DIR: dir, S: SECRET });
  const ready = await proc.waitFor<{ event?: string; url: string }>((v) => v.event === 'listening');
  return { proc, url: ready.url };
}

describe('acknowledged means stored: listen answers 2xx only after the pair is written', () => {
  it.each([1, 2, 3])('kill -9 under load from 40 clients, restart, every delivery sent again: none acknowledged is forwarded twice, none is lost (run %i)', async () => {
    const forwarded = new Map<string, number>();
    const app = await startServer((req, res) => {
      const t = (req.json as { trigger_id: string }).trigger_id;
      forwarded.set(t, (forwarded.get(t) ?? 0) + 1);
      sendJson(res, 200, { ok: true });
    });
    const dir = tempDir();
    const triggers = Array.from({ length: 3000 }, (_, i) => `trg_crash_${process.pid}_${Date.now()}_${i}`);
    const acknowledged = new Set<string>();
    try {
      const first = await startListen(dir, `${app.url}/hooks`);
      const agent = new Agent({ keepAlive: true, maxSockets: 40 });
      let next = 0;
      let killed = false;
      const worker = async () => {
        while (next < triggers.length) {
          const t = triggers[next++]!;
          const status = await deliver(first.url, agent, t);
          if (status >= 200 && status < 300) acknowledged.add(t);
          if (!killed && acknowledged.size >= 1000) {
            killed = true;
            first.proc.child.kill('SIGKILL');
          }
        }
      };
      await Promise.all(Array.from({ length: 40 }, worker));
      await first.proc.exited;
      agent.destroy();
      expect(killed).toBe(true);
      expect(acknowledged.size).toBeGreaterThanOrEqual(1000);
      expect(acknowledged.size).toBeLessThan(triggers.length); // the kill cut it short

      // the service's retries: every delivery again, to a listen started on the same store
      const second = await startListen(dir, `${app.url}/hooks`);
      const again = new Agent({ keepAlive: true, maxSockets: 40 });
      try {
        let i = 0;
        const retrier = async () => {
          while (i < triggers.length) {
            const t = triggers[i++]!;
            expect(await deliver(second.url, again, t)).toBe(200);
          }
        };
        await Promise.all(Array.from({ length: 40 }, retrier));
      } finally {
        again.destroy();
        await second.proc.stop();
      }
      const forwardedTwice = [...acknowledged].filter((t) => forwarded.get(t) !== 1);
      const neverForwarded = triggers.filter((t) => !forwarded.get(t));
      expect({ forwardedTwice: forwardedTwice.length, neverForwarded: neverForwarded.length }).toEqual({ forwardedTwice: 0, neverForwarded: 0 });
    } finally {
      await app.close();
    }
  }, 60_000);
});

describe('compaction never drops a live pair, even when the process dies in the middle of it', () => {
  const LIVE = 150_000;
  const EXPIRED = 100_000;
  const COPIES = 4;

  /**
   * A pairs file with LIVE pairs inside the TTL, each written COPIES times (as retried writes leave them),
   * and EXPIRED ones past it (kept, since this process has not seen the TTL pass): opening it compacts it.
   */
  function prepare(dir: string): string[] {
    const now = Date.now();
    const live = Array.from({ length: LIVE }, (_, i) => `trg_live_${i}`);
    const lines: string[] = [];
    for (let i = 0; i < EXPIRED; i++) lines.push(`{"t":"trg_expired_${i}","s":"1","at":${now - 30 * 3600_000}}`);
    for (let copy = 0; copy < COPIES; copy++) for (const t of live) lines.push(`{"t":"${t}","s":"1","at":${now - 3600_000}}`);
    writeFileSync(join(dir, 'processed-pairs.ndjson'), `${lines.join('\n')}\n`);
    return live;
  }

  /** Starts listen on the folder, and kills it -9 the moment `when` sees the compaction's temporary file reach that point. */
  async function killDuring(dir: string, when: (tmpBytes: number | undefined, seenTmp: boolean) => boolean): Promise<boolean> {
    const proc = startCli(['listen', '--port', '0', '--json', '--secret-env', 'S'], { WXHOOKS_CONFIG_DIR: dir, S: SECRET });
    let seenTmp = false;
    let killed = false;
    const check = () => {
      if (killed) return;
      const tmp = readdirSync(dir).find((f) => f.endsWith('.tmp'));
      let size: number | undefined;
      if (tmp) {
        seenTmp = true;
        try {
          size = statSync(join(dir, tmp)).size;
        } catch {
          size = undefined;
        }
      }
      if (when(size, seenTmp)) {
        killed = true;
        proc.child.kill('SIGKILL');
      }
    };
    const watcher = watch(dir, check);
    const poll = setInterval(check, 1);
    await Promise.race([proc.exited, proc.waitFor((v: { event?: string }) => v.event === 'listening', 30_000).catch(() => undefined)]);
    clearInterval(poll);
    watcher.close();
    if (!killed) await proc.stop();
    await proc.exited;
    return killed;
  }

  async function everyLivePairIsThere(dir: string, live: string[]) {
    const store = await FilePairStore.open({ dir, ttlMs: 24 * 3600_000 });
    try {
      const missing = live.filter((t) => !store.isDone(t, '1'));
      expect(missing).toEqual([]);
    } finally {
      await store.close();
    }
  }

  it.each([
    ['as soon as the new file appears', (size: number | undefined) => size !== undefined],
    ['half way through writing the new file', (size: number | undefined) => size !== undefined && size > 3_000_000],
    ['once the new file has been renamed into place', (size: number | undefined, seenTmp: boolean) => seenTmp && size === undefined],
  ])('killed %s', async (_name, when) => {
    const dir = tempDir();
    const live = prepare(dir);
    const killed = await killDuring(dir, when);
    expect(killed).toBe(true);
    await everyLivePairIsThere(dir, live);
    // and a listen started again is served from it
    const proc = startCli(['listen', '--port', '0', '--json', '--secret-env', 'S'], { WXHOOKS_CONFIG_DIR: dir, S: SECRET });
    try {
      const ready = await proc.waitFor<{ event?: string; url: string }>((v) => v.event === 'listening', 30_000);
      const agent = new Agent({ keepAlive: true });
      expect(await deliver(ready.url, agent, live[LIVE - 1]!)).toBe(200);
      const duplicate = await proc.waitFor<{ outcome?: string }>((v) => v.outcome === 'duplicate' || v.outcome === 'accepted');
      expect(duplicate.outcome).toBe('duplicate');
      agent.destroy();
    } finally {
      await proc.stop();
    }
  }, 60_000);
});
