import { appendFileSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FilePairStore } from '../src/store/file-pairs.js';
import { PairStoreError } from '../src/store/pair-store.js';
import { tempDir } from './helpers/cli.js';

// Ids as the service writes them, and ids no service should send but a file must still hold exactly.
const AWKWARD = ['trg_2026112100_wm6_003', '1', '', 'a"b', 'back\\slash', 'tab\there', 'nul\u0000', 'del\u007f', 'é', '雪', '🌧', 'lone\ud800', '</script>'];
const HOUR = 3600_000;

async function store(dir: string, now: number, extra: Partial<Parameters<typeof FilePairStore.open>[0]> = {}) {
  return FilePairStore.open({ dir, ttlMs: HOUR, now: () => now, ...extra });
}

describe('FilePairStore', () => {
  it('claims: won, then held while in progress, then done once completed; a released claim can be won again', async () => {
    const s = await store(tempDir(), 1000);
    try {
      expect(await s.claim('t1', 's1', 1000)).toBe('won');
      expect(await s.claim('t1', 's1', 1000)).toBe('held');
      expect(await s.claim('t1', 's2', 1000)).toBe('won'); // another subscription: another pair
      await s.complete('t1', 's1', 1000);
      expect(await s.claim('t1', 's1', 1001)).toBe('done');
      await s.release('t1', 's2');
      expect(await s.claim('t1', 's2', 1001)).toBe('won');
    } finally {
      await s.close();
    }
  });

  it('complete resolves only once the pair is in the file (write before the answer)', async () => {
    const dir = tempDir();
    const s = await store(dir, 1000);
    try {
      await s.claim('t1', 's1', 1000);
      const pending = s.complete('t1', 's1', 1000);
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
    const a = await store(dir, now);
    await Promise.all(AWKWARD.map(async (id, i) => (await a.claim(id, AWKWARD[(i + 3) % AWKWARD.length]!, now)) && a.complete(id, AWKWARD[(i + 3) % AWKWARD.length]!, now + i)));
    await a.close();
    const lines = readFileSync(a.file, 'utf8').trim().split('\n');
    expect(lines.map((l) => JSON.parse(l) as unknown)).toEqual(AWKWARD.map((id, i) => ({ t: id, s: AWKWARD[(i + 3) % AWKWARD.length], at: now + i })));
    const b = await store(dir, now + 1000);
    try {
      expect(b.size).toBe(AWKWARD.length);
      for (const [i, id] of AWKWARD.entries()) {
        expect(await b.claim(id, AWKWARD[(i + 3) % AWKWARD.length]!, now + 1000)).toBe('done');
        expect(await b.claim(id, `${AWKWARD[(i + 3) % AWKWARD.length]!}x`, now + 1000)).toBe('won');
      }
      // the ids and the subscription are kept apart: ("ab", "c") is not ("a", "bc")
      await b.claim('ab', 'c', now);
      await b.complete('ab', 'c', now);
      expect(await b.claim('a', 'bc', now)).toBe('won');
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
        if (!s.isDone(id(i), String(i % 7), 2000)) wrong.push(`${id(i)} not found`);
        if (s.isDone(id(i), String((i + 1) % 7), 2000)) wrong.push(`${id(i)} found under another subscription`);
        if (s.isDone(`${id(i)}x`, String(i % 7), 2000)) wrong.push(`${id(i)}x found`);
      }
      expect(wrong).toEqual([]);
    } finally {
      await s.close();
    }
  });

  it('drops pairs past the TTL while running, and compacts the file once it is over twice what is live', async () => {
    const dir = tempDir();
    let now = 0;
    const s = await FilePairStore.open({ dir, ttlMs: HOUR, now: () => now });
    try {
      for (let i = 0; i < 4000; i++) {
        await s.claim(`old_${i}`, '1', now);
        await s.complete(`old_${i}`, '1', now);
      }
      now = HOUR / 2;
      for (let i = 0; i < 1000; i++) {
        await s.claim(`new_${i}`, '1', now);
        await s.complete(`new_${i}`, '1', now);
      }
      const before = statSync(s.file).size;
      now = HOUR + 1000; // the old ones are past the TTL, the new ones are not
      s.expire(now);
      expect(s.size).toBe(1000);
      await new Promise((r) => setTimeout(r, 200)); // compaction runs in the background
      const after = readFileSync(s.file, 'utf8').trim().split('\n');
      expect(statSync(s.file).size).toBeLessThan(before / 3);
      expect(after).toHaveLength(1000);
      expect(after.every((l) => (JSON.parse(l) as { t: string }).t.startsWith('new_'))).toBe(true);
      // and it is still appended to
      await s.claim('later', '1', now);
      await s.complete('later', '1', now);
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
    await s.claim('c', '1', 2000);
    await s.complete('c', '1', 2000);
    await s.close();
    expect(readFileSync(file, 'utf8')).toBe('{"t":"a","s":"1","at":1000}\n{"t":"b","s":"1","at":1000}\n{"t":"c","s":"1","at":2000}\n');
    const again = await store(dir, 3000);
    try {
      for (const t of ['a', 'b', 'c']) expect(await again.claim(t, '1', 3000)).toBe('done');
    } finally {
      await again.close();
    }
    // and a torn line (half a record) is dropped, and the next pair still stands on its own line
    appendFileSync(file, '{"t":"d","s":"1","a');
    const torn = await store(dir, 3000);
    await torn.claim('e', '1', 3000);
    await torn.complete('e', '1', 3000);
    await torn.close();
    const reread = await store(dir, 3000);
    try {
      expect(await reread.claim('d', '1', 3000)).toBe('won');
      expect(await reread.claim('e', '1', 3000)).toBe('done');
    } finally {
      await reread.close();
    }
  });

  it('a write that fails (the disk is full) stores nothing, releases the claims, and rejects; persistently after giveUpMs', async () => {
    const dir = tempDir();
    symlinkSync('/dev/full', join(dir, 'processed-pairs.ndjson')); // every write: ENOSPC
    let now = 1000;
    const s = await FilePairStore.open({ dir, ttlMs: HOUR, now: () => now, giveUpMs: 5000 });
    try {
      expect(await s.claim('t1', 's1', now)).toBe('won');
      const first = await s.complete('t1', 's1', now).catch((e: unknown) => e);
      expect(first).toBeInstanceOf(PairStoreError);
      expect((first as PairStoreError).message).toContain('the disk is full (ENOSPC)');
      expect((first as PairStoreError).persistent).toBe(false);
      expect(await s.claim('t1', 's1', now)).toBe('won'); // released: the retry can get through
      now += 6000;
      const later = await s.complete('t1', 's1', now).catch((e: unknown) => e);
      expect((later as PairStoreError).persistent).toBe(true);
      expect((later as PairStoreError).exitCode).toBe(2);
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
        await s.claim(`t${i}`, '1', 1000);
        all.push(s.complete(`t${i}`, '1', 1000));
        if (i % 10 === 0) await new Promise((r) => setImmediate(r));
      }
      await Promise.all(all);
      expect(readFileSync(s.file, 'utf8').trim().split('\n')).toHaveLength(50);
    } finally {
      await s.close();
    }
  });
});
