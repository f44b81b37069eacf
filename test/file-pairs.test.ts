import { appendFileSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FilePairStore } from '../src/store/file-pairs.js';
import { PairStoreError } from '../src/store/pair-store.js';
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

  it('a write that fails (the disk is full) is undone and rejects; the pair stays processed: a retry is refused 503, never processed again; persistently after giveUpMs', async () => {
    const dir = tempDir();
    symlinkSync('/dev/full', join(dir, 'processed-pairs.ndjson')); // every write: ENOSPC
    const clock = manualClock(1000);
    const s = await FilePairStore.open({ dir, ttlMs: HOUR, clock, giveUpMs: 5000 });
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
