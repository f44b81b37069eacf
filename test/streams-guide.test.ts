import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as DEFAULTS from '../src/delivery/defaults.js';
import { OUTCOMES } from '../src/delivery/outcomes.js';
import { CONSUMER_OUTCOMES, DEAD_LETTER_CAUSES } from '../src/sinks/consumer.js';
import { FIELDS } from '../src/sinks/message.js';

// docs/streams.md held against the code it describes: every shell block is run by a test or says why
// not, and its tables of the message's fields, the consumer's options and outcomes are the code's.

const ROOT = resolve(import.meta.dirname, '..');
const GUIDE = readFileSync(resolve(ROOT, 'docs/streams.md'), 'utf8');

/** The rows of the markdown table whose header starts with `first`: each row's cells. */
function table(first: string): string[][] {
  const at = GUIDE.indexOf(`| ${first} |`);
  expect(at, `a table headed "${first}"`).toBeGreaterThan(-1);
  const lines = GUIDE.slice(at).split('\n');
  const rows: string[][] = [];
  for (const line of lines.slice(2)) {
    if (!line.startsWith('|')) break;
    rows.push(
      line
        .split(/(?<!\\)\|/)
        .slice(1, -1)
        .map((c) => c.trim()),
    );
  }
  return rows;
}

describe('docs/streams.md', () => {
  it('every sh block is preceded by a line naming the test that runs it, or why none does; each test named is there', () => {
    const blocks = [...GUIDE.matchAll(/(^.*)\n```sh\n/gm)];
    expect(blocks.length).toBeGreaterThan(3);
    for (const [, before] of blocks) {
      expect(before).toMatch(/^<!-- (tested: test\/\S+\.test\.ts|not tested: .+) -->$/);
      const named = /^<!-- tested: (\S+) -->$/.exec(before!)?.[1];
      if (named) expect(existsSync(resolve(ROOT, named)), named).toBe(true);
    }
  });

  it("the message's fields are the codec's, in its order", () => {
    expect(table('Field').map(([field]) => field!.replace(/`/g, ''))).toEqual([...FIELDS, 'body']);
  });

  it("the consumer's options table gives DEFAULTS' values", () => {
    const defaults = Object.fromEntries(table('Option').map(([option, fallback]) => [option!.replace(/`/g, ''), fallback]));
    expect(defaults.concurrency).toBe(String(DEFAULTS.consumerConcurrency));
    const seconds = (text: string | undefined) => Number(/(\d+) s\b/.exec(text ?? '')?.[1]) * 1000;
    expect(seconds(defaults.retryDelayMs)).toBe(DEFAULTS.consumerRetryDelayMs);
    expect(defaults.maxDeliveries).toBe(String(DEFAULTS.consumerMaxDeliveries));
    expect(seconds(defaults.claimTimeoutMs)).toBe(DEFAULTS.consumerClaimTimeoutMs);
    expect(seconds(defaults.handlerTimeoutMs)).toBe(DEFAULTS.handlerTimeoutLeases * DEFAULTS.claimLeaseMs);
  });

  it("the consumer's outcomes are the core's, each of them; the dead letters' causes each of the code's", () => {
    const rows = table('`outcome`');
    expect(rows.map(([outcome]) => outcome!.replace(/`/g, ''))).toEqual([...CONSUMER_OUTCOMES]);
    for (const outcome of CONSUMER_OUTCOMES) expect(outcome in OUTCOMES).toBe(true);
    const dead = rows.find(([outcome]) => outcome === '`dead_lettered`')![1]!;
    for (const cause of DEAD_LETTER_CAUSES) expect(dead).toContain(`\`${cause}\``);
  });

  it('the consumer example is examples/consumer.js, word for word', () => {
    expect(GUIDE).toContain(readFileSync(resolve(ROOT, 'examples/consumer.js'), 'utf8').trim());
  });
});
