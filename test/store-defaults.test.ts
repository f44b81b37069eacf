import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as DEFAULTS from '../src/delivery/defaults.js';

// One home for every default (DEFAULTS): the stores read the ones that are theirs, and restate none.

const STORE_KEYS = [
  'pairTtlMs',
  'claimLeaseMs',
  'storeGiveUpMs',
  'sweepIntervalMs',
  'storeWatchMs',
  'storeBriefWaitMs',
  'historyRows',
  'historyBytes',
  'historyPartBytes',
  'historyRefusedRows',
] as const;

/** The numbers a source writes as literals (`60_000`, `64 * 1024 * 1024`), comments left out. */
function literals(source: string): number[] {
  const code = source.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '');
  return [...code.matchAll(/(?<![\w.$])\d[\d_]*(?:\s*\*\s*\d[\d_]*)*(?![\w.])/g)].map((m) => m[0].split('*').reduce((n, f) => n * Number(f.trim().replaceAll('_', '')), 1));
}

describe('the stores and DEFAULTS', () => {
  const dir = join(import.meta.dirname, '../src/store');
  const files = readdirSync(dir).filter((f) => f.endsWith('.ts'));

  it.each(files)('src/store/%s writes none of the stores’ defaults as a literal (each is read from DEFAULTS)', (file) => {
    const found = literals(readFileSync(join(dir, file), 'utf8'));
    const defaults: Readonly<Record<(typeof STORE_KEYS)[number], number>> = DEFAULTS;
    const restated = STORE_KEYS.filter((k) => defaults[k] > 1000 && found.includes(defaults[k]));
    expect(restated).toEqual([]);
  });

  it('finds a restated default when there is one (the check can fail)', () => {
    expect(literals('const every = Math.min(60_000, x); // 24 * 3600\nconst b = 64 * 1024 * 1024;')).toEqual([60_000, 64 * 1024 * 1024]);
  });
});
