import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ProcessedPairs, quoted } from '../src/receiver/pairs.js';
import { tempDir } from './helpers/cli.js';

// Ids as the service writes them, and ids no service should send but a file must still hold exactly.
const AWKWARD = ['trg_2026112100_wm6_003', '1', '', 'a"b', 'back\\slash', 'tab\there', 'nul\u0000', 'del\u007f', 'é', '雪', '🌧', 'lone\ud800', '</script>'];

describe('ProcessedPairs', () => {
  it('quotes every id as JSON.stringify does', () => {
    for (const id of AWKWARD) expect(quoted(id)).toBe(JSON.stringify(id));
  });

  it('keeps every pair, awkward ids included, across a restart; a line per pair, parseable as JSON', () => {
    const dir = tempDir();
    const now = Date.now();
    const a = new ProcessedPairs(dir, 3600_000, now);
    AWKWARD.forEach((id, i) => a.add(id, AWKWARD[(i + 3) % AWKWARD.length]!, now + i));
    a.close();
    const lines = readFileSync(a.file, 'utf8').trim().split('\n');
    expect(lines.map((l) => JSON.parse(l) as unknown)).toEqual(AWKWARD.map((id, i) => ({ t: id, s: AWKWARD[(i + 3) % AWKWARD.length], at: now + i })));
    const b = new ProcessedPairs(dir, 3600_000, now + 1000);
    try {
      expect(b.size).toBe(AWKWARD.length);
      AWKWARD.forEach((id, i) => {
        expect(b.has(id, AWKWARD[(i + 3) % AWKWARD.length]!, now + 1000)).toBe(true);
        expect(b.has(id, `${AWKWARD[(i + 3) % AWKWARD.length]!}x`, now + 1000)).toBe(false);
      });
    } finally {
      b.close();
    }
  });

  it('finds each of 200,000 pairs, and no pair it was not given', () => {
    const pairs = new ProcessedPairs(tempDir(), 3600_000, 0);
    try {
      const n = 200_000;
      const id = (i: number) => `trg_${(i * 2654435761) % 4294967296}_${i}`;
      for (let i = 0; i < n; i++) pairs.add(id(i), String(i % 7), 1000);
      expect(pairs.size).toBe(n);
      const wrong: string[] = [];
      for (let i = 0; i < n; i++) {
        if (!pairs.has(id(i), String(i % 7), 2000)) wrong.push(`${id(i)} not found`);
        if (pairs.has(id(i), String((i + 1) % 7), 2000)) wrong.push(`${id(i)} found under another subscription`);
        if (pairs.has(`${id(i)}x`, String(i % 7), 2000)) wrong.push(`${id(i)}x found`);
      }
      expect(wrong).toEqual([]);
      // the ids and the subscription are kept apart: ("ab", "c") is not ("a", "bc")
      pairs.add('ab', 'c', 1000);
      expect(pairs.has('a', 'bc', 2000)).toBe(false);
      // marking a pair again keeps one entry, with the new time; the TTL counts from it
      pairs.add(id(0), '0', 3600_000 + 500);
      expect(pairs.size).toBe(n + 1);
      expect(pairs.has(id(0), '0', 2 * 3600_000)).toBe(true);
      expect(pairs.has(id(1), '1', 2 * 3600_000)).toBe(false);
    } finally {
      pairs.close();
    }
  });
});
