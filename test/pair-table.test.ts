import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../src/delivery/memory-store.js';
import { PairTable } from '../src/delivery/pair-table.js';

// The processed pairs in memory past `maxPairs` (src/delivery/pair-table.ts): the oldest learnt of goes
// first, whichever subscription it is of; a pair learnt of again is as new; and the limit holds for as
// many pairs as are sent, at the cost of one forget each.

describe('maxPairs: the oldest pair learnt of is forgotten', () => {
  it('across subscriptions, in the order learnt of; a pair remembered again counts as new', async () => {
    let now = 1_000;
    const store = new MemoryStore({ maxPairs: 3, now: () => now });
    for (const [t, s] of [
      ['trg_1', 'sub_a'],
      ['trg_2', 'sub_b'],
      ['trg_3', 'sub_a'],
    ]) {
      expect(await store.claim(t!, s!)).toBe('won');
      await store.complete(t!, s!);
      now += 10;
    }
    await store.complete('trg_1', 'sub_a'); // learnt of again: now the newest
    await store.complete('trg_4', 'sub_b'); // the fourth: the oldest (trg_2) goes
    expect(store.size).toBe(3);
    expect(await store.peek('trg_2', 'sub_b')).toBe('free');
    for (const [t, s] of [
      ['trg_1', 'sub_a'],
      ['trg_3', 'sub_a'],
      ['trg_4', 'sub_b'],
    ])
      expect(await store.peek(t!, s!)).toBe('done');
    await store.complete('trg_5', 'sub_c'); // then trg_3, not trg_1
    expect(await store.peek('trg_3', 'sub_a')).toBe('free');
    expect(await store.peek('trg_1', 'sub_a')).toBe('done');
  });

  it('300,000 pairs through a table of 1,000: each forgotten once, in order, and the last 1,000 kept', () => {
    let now = 0;
    const forgotten: string[] = [];
    const table = new PairTable({ ttlMs: 86_400_000, leaseMs: 60_000, maxPairs: 1_000, clock: { now: () => now, monotonic: () => now }, onForget: (t) => forgotten.push(t) });
    const N = 300_000;
    for (let i = 0; i < N; i++) {
      now++;
      table.remember(`trg_${i}`, `sub_${i % 7}`, now);
    }
    expect(table.size).toBe(1_000);
    expect(forgotten).toHaveLength(N - 1_000);
    expect(forgotten[0]).toBe('trg_0');
    expect(forgotten.at(-1)).toBe(`trg_${N - 1_001}`);
    expect(table.isDone(`trg_${N - 1_000}`, `sub_${(N - 1_000) % 7}`)).toBe(true);
    expect(table.isDone(`trg_${N - 1_001}`, `sub_${(N - 1_001) % 7}`)).toBe(false);
  });
});
