import { spawn } from 'node:child_process';
import { appendFileSync, existsSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../src/delivery/memory-store.js';
import type { StoreNotice } from '../src/delivery/store.js';
import { UsageError } from '../src/errors.js';
import { openStore } from '../src/index.js';
import { FilePairStore, pairsFileName } from '../src/store/file-pairs.js';
import { tempDir } from './helpers/cli.js';
import { manualClock, type ManualClock } from './helpers/clock.js';

// Ids as the service writes them, and ids no service should send but a file must still hold exactly.
const AWKWARD = ['trg_2026112100_wm6_003', '1', '', 'a"b', 'back\\slash', 'tab\there', 'nul\u0000', 'del\u007f', 'é', '雪', '🌧', 'lone\ud800', '</script>'];
const HOUR = 3600_000;

/** A store on a clock that reads `now` (ms) on the wall. */
async function store(dir: string, now: number, extra: Partial<Parameters<typeof FilePairStore.open>[0]> = {}) {
  return FilePairStore.open({ dir, ttlMs: HOUR, clock: manualClock(now), ...extra });
}

describe('FilePairStore', () => {
  it('claims: won, then held while in progress, then done once completed; a released claim can be won again', async () => {
    const s = await store(tempDir(), 1000);
    try {
      expect(await s.claim('t1', 's1')).toBe('won');
      expect(await s.claim('t1', 's1')).toBe('held');
      expect(await s.claim('t1', 's2')).toBe('won'); // another subscription: another pair
      await s.complete('t1', 's1');
      expect(await s.claim('t1', 's1')).toBe('done');
      await s.release('t1', 's2');
      expect(await s.claim('t1', 's2')).toBe('won');
    } finally {
      await s.close();
    }
  });

  it('complete resolves only once the pair is in the file (write before the answer)', async () => {
    const dir = tempDir();
    const s = await store(dir, 1000);
    try {
      await s.claim('t1', 's1');
      const pending = s.complete('t1', 's1');
      // not yet written: the batch is written at the end of this turn of the event loop
      expect(readFileSync(join(dir, 'processed-pairs.ndjson'), 'utf8')).toBe('');
      await pending;
      expect(readFileSync(join(dir, 'processed-pairs.ndjson'), 'utf8')).toBe('{"t":"t1","s":"s1","at":1000}\n');
    } finally {
      await s.close();
    }
  });

  it('keeps every pair, awkward ids included, across a restart; a line per pair, parseable as JSON', async () => {
    const dir = tempDir();
    const now = 1_000_000;
    const clock = manualClock(now);
    const a = await FilePairStore.open({ dir, ttlMs: HOUR, clock });
    for (const [i, id] of AWKWARD.entries()) {
      await a.claim(id, AWKWARD[(i + 3) % AWKWARD.length]!);
      await a.complete(id, AWKWARD[(i + 3) % AWKWARD.length]!);
      clock.advance(1);
    }
    await a.close();
    const lines = readFileSync(a.file, 'utf8').trim().split('\n');
    expect(lines.map((l) => JSON.parse(l) as unknown)).toEqual(AWKWARD.map((id, i) => ({ t: id, s: AWKWARD[(i + 3) % AWKWARD.length], at: now + i })));
    const b = await store(dir, now + 1000);
    try {
      expect(b.size).toBe(AWKWARD.length);
      for (const [i, id] of AWKWARD.entries()) {
        expect(await b.claim(id, AWKWARD[(i + 3) % AWKWARD.length]!)).toBe('done');
        expect(await b.claim(id, `${AWKWARD[(i + 3) % AWKWARD.length]!}x`)).toBe('won');
      }
      // the ids and the subscription are kept apart: ("ab", "c") is not ("a", "bc")
      await b.claim('ab', 'c');
      await b.complete('ab', 'c');
      expect(await b.claim('a', 'bc')).toBe('won');
    } finally {
      await b.close();
    }
  });

  it('finds each of 100,000 pairs after a restart, and no pair it was not given', async () => {
    const dir = tempDir();
    const n = 100_000;
    const id = (i: number) => `trg_${(i * 2654435761) % 4294967296}_${i}`;
    writeFileSync(join(dir, 'processed-pairs.ndjson'), Array.from({ length: n }, (_, i) => `{"t":"${id(i)}","s":"${i % 7}","at":1000}\n`).join(''));
    const s = await store(dir, 2000);
    try {
      expect(s.size).toBe(n);
      const wrong: string[] = [];
      for (let i = 0; i < n; i++) {
        if (!s.isDone(id(i), String(i % 7))) wrong.push(`${id(i)} not found`);
        if (s.isDone(id(i), String((i + 1) % 7))) wrong.push(`${id(i)} found under another subscription`);
        if (s.isDone(`${id(i)}x`, String(i % 7))) wrong.push(`${id(i)}x found`);
      }
      expect(wrong).toEqual([]);
    } finally {
      await s.close();
    }
  });

  it('drops pairs past the TTL while running, and compacts the file once it is over twice what is live', async () => {
    const dir = tempDir();
    const clock = manualClock(0);
    const s = await FilePairStore.open({ dir, ttlMs: HOUR, clock });
    try {
      for (let i = 0; i < 4000; i++) {
        await s.claim(`old_${i}`, '1');
        await s.complete(`old_${i}`, '1');
      }
      clock.advance(HOUR / 2);
      for (let i = 0; i < 1000; i++) {
        await s.claim(`new_${i}`, '1');
        await s.complete(`new_${i}`, '1');
      }
      const before = statSync(s.file).size;
      clock.advance(HOUR / 2 + 1000); // the old ones are past the TTL, the new ones are not
      expect(s.isDone('old_0', '1')).toBe(false);
      s.expire();
      expect(s.size).toBe(1000);
      await s.settled(); // compaction runs in the background
      const after = readFileSync(s.file, 'utf8').trim().split('\n');
      expect(statSync(s.file).size).toBeLessThan(before / 3);
      expect(after).toHaveLength(1000);
      expect(after.every((l) => (JSON.parse(l) as { t: string }).t.startsWith('new_'))).toBe(true);
      // and it is still appended to
      await s.claim('later', '1');
      await s.complete('later', '1');
      expect(readFileSync(s.file, 'utf8').trim().split('\n')).toHaveLength(1001);
    } finally {
      await s.close();
    }
  });

  it('a last line without its newline (a crash mid-write) is kept apart from the next pair', async () => {
    const dir = tempDir();
    const file = join(dir, 'processed-pairs.ndjson');
    writeFileSync(file, '{"t":"a","s":"1","at":1000}\n{"t":"b","s":"1","at":1000}'); // b's newline never made it
    const s = await store(dir, 2000);
    await s.claim('c', '1');
    await s.complete('c', '1');
    await s.close();
    expect(readFileSync(file, 'utf8')).toBe('{"t":"a","s":"1","at":1000}\n{"t":"b","s":"1","at":1000}\n{"t":"c","s":"1","at":2000}\n');
    const again = await store(dir, 3000);
    try {
      for (const t of ['a', 'b', 'c']) expect(await again.claim(t, '1')).toBe('done');
    } finally {
      await again.close();
    }
    // and a torn line (half a record) is dropped, and the next pair still stands on its own line
    appendFileSync(file, '{"t":"d","s":"1","a');
    const torn = await store(dir, 3000);
    await torn.claim('e', '1');
    await torn.complete('e', '1');
    await torn.close();
    const reread = await store(dir, 3000);
    try {
      expect(await reread.claim('d', '1')).toBe('won');
      expect(await reread.claim('e', '1')).toBe('done');
    } finally {
      await reread.close();
    }
  });

  it('with fsync, complete resolves after the sync; pairs completed meanwhile go in the next batch', async () => {
    const dir = tempDir();
    const s = await store(dir, 1000, { fsync: true });
    try {
      const all = [];
      for (let i = 0; i < 50; i++) {
        await s.claim(`t${i}`, '1');
        all.push(s.complete(`t${i}`, '1'));
        if (i % 10 === 0) await new Promise((r) => setImmediate(r));
      }
      await Promise.all(all);
      expect(readFileSync(s.file, 'utf8').trim().split('\n')).toHaveLength(50);
    } finally {
      await s.close();
    }
  });
});

/** Each in-process store on a clock the test moves: MemoryStore, and the file store as an app opens it (openStore). */
const IN_PROCESS = [
  ['MemoryStore', async (clock: ManualClock, leaseMs: number) => new MemoryStore({ leaseMs, now: () => clock.monotonic() })],
  ["openStore('file')", async (clock: ManualClock, leaseMs: number) => openStore('file', { dir: tempDir(), leaseMs, clock })],
] as const;

describe.each(IN_PROCESS)('leases (#32.8): %s', (_name, make) => {
  const LEASE = 30_000;

  it('a claim neither extended nor completed (a hung handler) is taken over once its lease has passed, not before', async () => {
    const clock = manualClock(1000);
    const s = await make(clock, LEASE);
    try {
      expect(s.leaseMs).toBe(LEASE);
      expect(await s.claim('t', 's')).toBe('won');
      clock.advance(LEASE);
      expect(await s.claim('t', 's')).toBe('held');
      clock.advance(1);
      expect(await s.claim('t', 's')).toBe('won'); // the service's retry processes it
      expect(await s.claim('t', 's')).toBe('held'); // and holds it in turn
    } finally {
      await s.close();
    }
  });

  it('extend keeps a claim held past its lease, as long as it is extended; then done once completed', async () => {
    const clock = manualClock(1000);
    const s = await make(clock, LEASE);
    try {
      expect(await s.claim('t', 's')).toBe('won');
      for (let i = 0; i < 10; i++) {
        clock.advance(LEASE / 3); // what the core does while the delivery is handled
        expect(await s.extend('t', 's')).toBe(true);
        expect(await s.claim('t', 's')).toBe('held');
      }
      await s.complete('t', 's');
      expect(await s.claim('t', 's')).toBe('done');
    } finally {
      await s.close();
    }
  });

  it('extend of a claim let go, completed or never made resolves false, and claims nothing', async () => {
    const clock = manualClock(1000);
    const s = await make(clock, LEASE);
    try {
      expect(await s.extend('never', 's')).toBe(false);
      await s.claim('released', 's');
      await s.release('released', 's');
      expect(await s.extend('released', 's')).toBe(false);
      expect(await s.claim('released', 's')).toBe('won');
      await s.claim('completed', 's');
      await s.complete('completed', 's');
      expect(await s.extend('completed', 's')).toBe(false);
      expect(await s.claim('completed', 's')).toBe('done');
    } finally {
      await s.close();
    }
  });

  it("taken over in this process: the late holder's release does not free the pair under the one that took it; an extend renews the pair's claim", async () => {
    const clock = manualClock(1000);
    const s = await make(clock, LEASE);
    try {
      expect(await s.claim('t', 's')).toBe('won'); // a handler whose event loop is then held past the lease
      clock.advance(LEASE + 1);
      expect(await s.claim('t', 's')).toBe('won'); // the retry takes it over
      await s.release('t', 's'); // the first handler fails at last, and lets go
      expect(await s.claim('t', 's')).toBe('held'); // the retry still handles it: no third run
      // the two holders of one pair in one store cannot be told apart (the contract names a claim by its pair)
      expect(await s.extend('t', 's')).toBe(true);
      await s.release('t', 's');
      expect(await s.claim('t', 's')).toBe('won');
    } finally {
      await s.close();
    }
  });

  it('a claim whose lease passed, extended before anyone took it over, is held again (a holder late to extend keeps it)', async () => {
    const clock = manualClock(1000);
    const s = await make(clock, LEASE);
    try {
      await s.claim('t', 's');
      clock.advance(LEASE * 2);
      expect(await s.extend('t', 's')).toBe(true);
      expect(await s.claim('t', 's')).toBe('held');
    } finally {
      await s.close();
    }
  });
});

describe('one owner per pairs file (#32.1), in this process', () => {
  it('a second store on the folder is refused (exit 2) while the first is open, saying who holds it, why and what to do; once closed, it opens', async () => {
    const dir = tempDir();
    const first = await store(dir, 1000);
    const err = await store(dir, 1000).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UsageError);
    expect((err as UsageError).exitCode).toBe(2);
    expect((err as Error).message).toBe(
      `The processed-pairs file ${join(dir, 'processed-pairs.ndjson')} is in use by this process, which has it open already. Two processes cannot share one: each would forget the pairs the other processed, and process a delivery twice.`,
    );
    expect((err as UsageError).hint).toMatch(/^Run one listen per webhook: `listen --webhook ID` keeps a file of its own.*--store postgres:\/\//);
    await first.claim('t', '1');
    await first.complete('t', '1');
    await first.close();
    expect(existsSync(join(dir, 'processed-pairs.ndjson.owner'))).toBe(false);
    const second = await store(dir, 2000);
    try {
      expect(await second.claim('t', '1')).toBe('done');
    } finally {
      await second.close();
    }
  });

  it('an app is told what an app can do', async () => {
    const dir = tempDir();
    const first = await openStore('file', { dir });
    try {
      const err = await openStore('file', { dir }).catch((e: unknown) => e);
      expect((err as UsageError).hint).toBe(
        "Give each instance of the app its own dir, or share one PostgreSQL store between them (openStore('postgres://…')), which processes each delivery once whichever instance receives it.",
      );
    } finally {
      await first.close();
    }
  });

  it('a lock whose process is gone is taken over and said; one whose pid is now another process is too; a live one, or one on another host, is not', async () => {
    const dir = tempDir();
    const file = join(dir, 'processed-pairs.ndjson');
    const owner = join(dir, 'processed-pairs.ndjson.owner');
    const { pid: gonePid } = await exited(); // a process that ran, and is gone
    const plant = (o: object) => writeFileSync(owner, JSON.stringify({ host: hostname(), token: 'abc', started: '2026-11-24T00:00:00.000Z', command: 'wxhooks.js listen', ...o }));

    plant({ pid: gonePid });
    const notices: StoreNotice[] = [];
    const s = await FilePairStore.open({ dir, ttlMs: HOUR, onNotice: (n) => notices.push(n) });
    await s.close();
    expect(notices).toEqual([{ kind: 'lock_taken_over', file, pid: gonePid, host: hostname(), started: '2026-11-24T00:00:00.000Z' }]);

    // a live process (the test runner's parent), recorded with another start: its pid was reused, the owner is gone
    const start = Number(readFileSync(`/proc/${process.ppid}/stat`, 'utf8').split(') ')[1]!.split(' ')[19]);
    plant({ pid: process.ppid, start: start + 1 });
    await (await store(dir, 1000)).close();
    // with its own start, it is the owner, and it runs
    plant({ pid: process.ppid, start });
    const live = await store(dir, 1000).catch((e: unknown) => e);
    expect((live as Error).message).toContain(`is in use by process ${process.ppid} (wxhooks.js listen, started 2026-11-24T00:00:00.000Z)`);
    // another host's process cannot be asked about: refused, and told how to take it if that process is gone
    plant({ pid: process.ppid, host: 'elsewhere.example' });
    const remote = await store(dir, 1000).catch((e: unknown) => e);
    expect((remote as Error).message).toContain(`is in use by process ${process.ppid} on elsewhere.example`);
    expect((remote as UsageError).hint).toContain(`If that process no longer runs, remove ${owner}.`);
    // our own pid, but not an opening of this process: a process before us in this pid (a container restarted)
    plant({ pid: process.pid });
    await (await store(dir, 1000)).close();
  });

  it('one file per webhook: two stores for two webhooks share the folder, a second for one of them is refused', async () => {
    const dir = tempDir();
    const seven = await FilePairStore.open({ dir, webhook: '7', ttlMs: HOUR });
    const eight = await FilePairStore.open({ dir, webhook: '8', ttlMs: HOUR });
    const shared = await FilePairStore.open({ dir, ttlMs: HOUR });
    try {
      expect([seven.file, eight.file, shared.file]).toEqual(['processed-pairs.webhook-7.ndjson', 'processed-pairs.webhook-8.ndjson', 'processed-pairs.ndjson'].map((f) => join(dir, f)));
      await expect(FilePairStore.open({ dir, webhook: '7', ttlMs: HOUR })).rejects.toThrow(/processed-pairs\.webhook-7\.ndjson is in use by this process/);
      // an id that is no plain file name gets a hash of itself
      expect(pairsFileName('../x y')).toMatch(/^processed-pairs\.webhook-~[0-9a-f]{32}\.ndjson$/);
      expect(pairsFileName('../x y')).not.toBe(pairsFileName('../x z'));
    } finally {
      await Promise.all([seven.close(), eight.close(), shared.close()]);
    }
  });

  it("a webhook's file starts from the shared file, so what was acknowledged before each webhook had its own is still skipped", async () => {
    const dir = tempDir();
    const before = await store(dir, 1000);
    await before.claim('acked', '12');
    await before.complete('acked', '12');
    await before.close();
    const seven = await FilePairStore.open({ dir, webhook: '7', ttlMs: HOUR, clock: manualClock(2000) });
    try {
      expect(await seven.claim('acked', '12')).toBe('done');
    } finally {
      await seven.close();
    }
  });

  it("a temporary webhook's file goes when its store closes; one left by a process that is gone goes at the next one's start", async () => {
    const dir = tempDir();
    const tmp = await FilePairStore.open({ dir, webhook: '41', temporary: true, ttlMs: HOUR });
    expect(tmp.file).toBe(join(dir, 'processed-pairs.temporary-41.ndjson'));
    await tmp.claim('t', '1');
    await tmp.complete('t', '1');
    await tmp.close();
    expect(readdirSync(dir)).toEqual([]);
    // killed -9: its file and its lock are left
    writeFileSync(join(dir, 'processed-pairs.temporary-42.ndjson'), '{"t":"t","s":"1","at":1}\n');
    writeFileSync(join(dir, 'processed-pairs.temporary-42.ndjson.owner'), JSON.stringify({ pid: (await exited()).pid, host: hostname(), token: 'x', started: '?', command: '?' }));
    const next = await FilePairStore.open({ dir, webhook: '43', temporary: true, ttlMs: HOUR });
    try {
      expect(readdirSync(dir).sort()).toEqual(['processed-pairs.temporary-43.ndjson', 'processed-pairs.temporary-43.ndjson.owner']);
    } finally {
      await next.close();
    }
  });

  it('the guard of the lock: another process in its turn is waited for; one left by a process that died in its turn is removed', async () => {
    const dir = tempDir();
    const guard = join(dir, 'processed-pairs.ndjson.owner.guard');
    writeFileSync(guard, '');
    let opened = false;
    const waiting = store(dir, 1000).then((s) => ((opened = true), s));
    for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 10)); // its tries, while the guard is held
    expect(opened).toBe(false);
    rmSync(guard); // that process's turn ends
    await (await waiting).close();
    writeFileSync(guard, '');
    utimesSync(guard, new Date(Date.now() - 60_000), new Date(Date.now() - 60_000));
    await (await store(dir, 1000)).close();
    expect(existsSync(guard)).toBe(false);
  });

  it('the lock deleted while the store runs (a folder cleaned by hand) is written again at the next look', async () => {
    const dir = tempDir();
    const s = await FilePairStore.open({ dir, ttlMs: HOUR, watchMs: 0 });
    try {
      rmSync(join(dir, 'processed-pairs.ndjson.owner'));
      s.watch();
      await expect(store(dir, 1000)).rejects.toThrow(/in use by this process/);
    } finally {
      await s.close();
    }
  });
});

/** A process that ran and exited: its pid is no one's (until the system gives it out again, long after). */
async function exited(): Promise<{ pid: number }> {
  const child = spawn(process.execPath, ['-e', '0']);
  await new Promise((resolve) => child.on('exit', resolve));
  return { pid: child.pid! };
}
