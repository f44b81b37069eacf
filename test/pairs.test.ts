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
});
