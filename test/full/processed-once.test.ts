import { Agent } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../../scripts/harness.js';
import { PairStoreError } from '../../src/delivery/store.js';
import { FilePairStore } from '../../src/store/file-pairs.js';
import type { StoreNotice } from '../../src/store/pair-store.js';
import { tempDir } from '../helpers/cli.js';
import { manualClock } from '../helpers/clock.js';
import { runInProcess } from '../helpers/context.js';
import { smallDisk, type SmallDisk } from '../helpers/disk.js';
import { startCli } from '../helpers/process.js';
import { countingApp, deliver, processedOnce } from '../helpers/processed-once.js';
import { startTestReceiver, TEST_SECRET } from '../helpers/receiver.js';

// Processed once on a full disk (a small tmpfs, mounted as root, as CI runs) and with a closed output
// pipe (the built binary: its stdout is the point). The clock, the file and the connection:
// test/processed-once.test.ts (the file store alone: test/file-pairs.test.ts).

const DAY = 86_400_000;
const HOUR = 3_600_000;
const disks: SmallDisk[] = [];
afterAll(() => disks.forEach((d) => d.unmount()));

describe('a full disk', () => {
  it('FilePairStore: a write that fails (the disk is full) is undone and rejects; the pair stays processed: a retry is refused 503, never processed again; persistently after giveUpMs', async () => {
    // a disk of its own, filled once the store is open: every write ENOSPC (a link to /dev/full is refused now: #32.3)
    const disk = smallDisk(64);
    const dir = disk.dir;
    const clock = manualClock(1000);
    const s = await FilePairStore.open({ dir, ttlMs: HOUR, clock, giveUpMs: 5000 });
    disk.fill();
    try {
      expect(await s.claim('t1', 's1')).toBe('won');
      const first = await s.complete('t1', 's1').catch((e: unknown) => e);
      expect(first).toBeInstanceOf(PairStoreError);
      expect((first as PairStoreError).message).toContain('the disk is full (ENOSPC)');
      expect((first as PairStoreError).persistent).toBe(false);
      expect(s.pendingPairs).toBe(1);
      // its retry: not won (it was processed), but not a duplicate either until the pair is written
      const retry = await s.claim('t1', 's1').catch((e: unknown) => e);
      expect(retry).toBeInstanceOf(PairStoreError);
      expect((retry as PairStoreError).processed).toBe(true);
      clock.advance(6000);
      expect(await s.claim('t2', 's1')).toBe('won');
      const later = await s.complete('t2', 's1').catch((e: unknown) => e);
      expect((later as PairStoreError).persistent).toBe(true);
      expect((later as PairStoreError).exitCode).toBe(10);
    } finally {
      await s.close();
      disk.unmount();
    }
  });

  it('a delivery forwarded whose pair cannot be written: 503, its retries 503 without a second forward; once there is room, stored (later) and its retry a duplicate', async () => {
    const disk = smallDisk(64);
    disks.push(disk);
    const app = await countingApp();
    const notices: StoreNotice[] = [];
    const store = await FilePairStore.open({ dir: disk.dir, ttlMs: DAY, watchMs: 0, onNotice: (n) => notices.push(n) });
    const r = await startTestReceiver({ store, forwardTo: `${app.url}/hooks` });
    const agent = new Agent({ keepAlive: true, maxSockets: 20 });
    const acknowledged = new Set<string>();
    const send = async (ids: string[]) => {
      const statuses = await Promise.all(ids.map((t) => deliver(r.url, agent, t)));
      ids.forEach((t, i) => statuses[i] === 200 && acknowledged.add(t));
      return statuses;
    };
    try {
      const first = Array.from({ length: 20 }, (_, i) => `trg_disk_a${i}`);
      expect(await send(first)).toEqual(first.map(() => 200));
      disk.fill();
      const ids = Array.from({ length: 300 }, (_, i) => `trg_disk_b${i}`);
      const statuses = await send(ids);
      const refused = ids.filter((_, i) => statuses[i] === 503);
      expect(refused.length).toBeGreaterThan(200); // a few may still fit in the file's last block
      expect(statuses.every((s) => s === 200 || s === 503)).toBe(true);
      processedOnce(app.forwarded, acknowledged);
      expect(app.forwarded).toHaveLength(320); // each forwarded, once

      // the service retries them while the disk is still full: 503 again, and none is forwarded again
      const from = r.events.length;
      expect(await send(refused)).toEqual(refused.map(() => 503));
      expect(app.forwarded).toHaveLength(320);
      const retryLine = r.events.slice(from).find((e) => e.outcome === 'store_failed')!;
      expect(retryLine.message).toContain('Already processed');

      // room again: half the retries come first, and find their pairs written now; the store writes the rest by itself
      disk.free();
      const half = refused.slice(0, 100);
      const later = r.events.length;
      expect(await send(half)).toEqual(half.map(() => 200));
      expect(r.events.slice(later).every((e) => e.outcome === 'duplicate' && e.stored_later === true)).toBe(true);
      store.watch(); // what its timer does every second
      await store.settled();
      expect(notices).toContainEqual({ kind: 'stored_later', pairs: refused.length - 100 });
      const rest = refused.slice(100);
      expect(await send(rest)).toEqual(rest.map(() => 200));
      expect(app.forwarded).toHaveLength(320);
      processedOnce(app.forwarded, acknowledged);
    } finally {
      agent.destroy();
      await r.close();
      await store.close();
      await app.close();
    }
    // and after a restart, every one of them is a duplicate
    const again = await FilePairStore.open({ dir: disk.dir, ttlMs: DAY });
    try {
      for (const t of acknowledged) expect(await again.claim(t, '1')).toBe('done');
    } finally {
      await again.close();
    }
  });

  it('a full disk that stays full: listen stops with exit 10 once the pairs have not been writable for the give-up time, having said so; started on it, listen cannot take its file (exit 2)', async () => {
    const disk = smallDisk(64);
    disks.push(disk);
    const clock = manualClock(Date.now());
    const port = await freePort();
    const env = { S: TEST_SECRET, WXHOOKS_CONFIG_DIR: disk.dir };
    const run = runInProcess(['listen', '--port', String(port), '--json', '--secret-env', 'S'], { env, clock });
    const agent = new Agent({ keepAlive: true });
    try {
      await waitUntilListening(port);
      disk.fill();
      const ts = () => Math.floor(clock.now() / 1000);
      expect(await deliver(`http://127.0.0.1:${port}/`, agent, 'trg_full_1', ts())).toBe(503);
      clock.advance(61_000);
      expect(await deliver(`http://127.0.0.1:${port}/`, agent, 'trg_full_2', ts())).toBe(503);
      const { code, stdout, stderr } = await run;
      expect(code).toBe(10);
      expect(stderr).toContain('has not been writable for 61 s');
      expect(stdout).toContain('"outcome":"store_failed"');
    } finally {
      agent.destroy();
    }
    // started on a disk with no room at all: it cannot record itself as the file's owner
    disk.fill();
    const again = await runInProcess(['listen', '--port', '0', '--json', '--secret-env', 'S'], { env, clock });
    expect(again.code).toBe(2);
    expect(again.stderr).toContain(`Cannot lock the processed-pairs file ${join(disk.dir, 'processed-pairs.ndjson')}: the disk is full (ENOSPC).`);
  });
});

/** Resolves once something answers HTTP on the port (listen, started in this process). */
async function waitUntilListening(port: number): Promise<void> {
  for (;;) {
    const up = await new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1', () => (s.destroy(), resolve(true)));
      s.on('error', () => resolve(false));
    });
    if (up) return;
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('a closed output pipe', () => {
  it('listen --json | head -1: the rest answered and stored, one line on stderr, exit 141; a restarted listen skips what was acknowledged', async () => {
    const dir = tempDir();
    const port = await freePort();
    const proc = startCli(['listen', '--port', String(port), '--json', '--secret-env', 'S'], { S: TEST_SECRET, WXHOOKS_CONFIG_DIR: dir });
    await proc.waitFor<{ event?: string }>((v) => v.event === 'listening');
    const agent = new Agent({ keepAlive: true, maxSockets: 10 });
    const url = `http://127.0.0.1:${port}/`;
    const acknowledged: string[] = [];
    try {
      expect(await deliver(url, agent, 'trg_pipe_0')).toBe(200);
      acknowledged.push('trg_pipe_0');
      proc.child.stdout.destroy(); // the reader is gone, as `head -1` goes after its line
      // deliveries go on arriving: each is answered (and stored) or refused, until listen has stopped
      for (let i = 1; i < 200 && proc.child.exitCode === null; i++) {
        const status = await deliver(url, agent, `trg_pipe_${i}`);
        if (status === 200) acknowledged.push(`trg_pipe_${i}`);
        else expect(status).toBe(0); // connection refused: listen has stopped
      }
      expect(await proc.exited).toBe(141);
      expect(proc.stderr()).toContain('stdout was closed by its reader (EPIPE)');
    } finally {
      agent.destroy();
      await proc.stop();
    }
    expect(acknowledged.length).toBeGreaterThan(1);
    const store = await FilePairStore.open({ dir, ttlMs: DAY });
    try {
      for (const t of acknowledged) expect(store.isDone(t, '1'), t).toBe(true);
    } finally {
      await store.close();
    }
  });
});
