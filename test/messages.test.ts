import { chmodSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Webhooks } from '../src/index.js';
import { truncateWords } from '../src/output/render.js';
import { runCli, tempDir } from './helpers/cli.js';
import { startTestReceiver, TEST_SECRET, type TestReceiver } from './helpers/receiver.js';

// What a person reads when something is wrong: send's error, the library's missing-secret error, and
// secret show's warning about a store others can read. Each in-process, against a real receiver.

const OTHER = `whsec_${Buffer.alloc(32, 5).toString('base64')}`;
let receiver: TestReceiver;

beforeAll(async () => {
  receiver = await startTestReceiver({ secret: TEST_SECRET });
});
afterAll(async () => {
  await receiver?.close();
});

describe("#41.20 send: the receiver's answer fitted without cutting a word", () => {
  it('a 401 whose hint is longer than the line: every word shown is whole', async () => {
    const r = await runCli(['send', '--to', receiver.url, '--secret-env', 'S'], { env: { S: OTHER } });
    expect(r.code).toBe(7);
    const answered = /answered 401 in \d+ ms: (.*)$/m.exec(r.stderr)![1]!;
    expect(answered.endsWith('…')).toBe(true);
    const shown = answered.slice(0, -1);
    // what the receiver said, from its start, up to a whole word
    const said = (receiver.events.at(-1)!.hint ?? '').split(' ');
    expect(shown).toContain('"hint":"');
    const lastWord = shown.split(/[\s"]/).at(-1)!;
    expect(
      said.some((w) => w.replace(/[^\w-]/g, '') === lastWord.replace(/[^\w-]/g, '')),
      `"${lastWord}" is a whole word of the hint`,
    ).toBe(true);
  });

  it('--json: the error line is fitted the same way', async () => {
    const r = await runCli(['send', '--to', receiver.url, '--secret-env', 'S', '--json'], { env: { S: OTHER } });
    expect(r.code).toBe(7);
    const line = /^error: The receiver answered 401: (.*)$/m.exec(r.stderr)![1]!;
    const body = (JSON.parse(r.stdout) as { body: string }).body;
    const shown = line.slice(0, -1);
    expect(line.endsWith('…')).toBe(true);
    expect(body.startsWith(shown)).toBe(true);
    expect(/[\s,;:.)\]}"]/.test(body[shown.length]!) || /[\s,;:.)\]}"]$/.test(shown)).toBe(true);
  });

  it('truncateWords: at a space, else after a punctuation mark; a text that fits is whole', () => {
    expect(truncateWords('short enough', 20)).toBe('short enough');
    expect(truncateWords('A re-created webhook has a new secret.', 30)).toBe('A re-created webhook has a…');
    expect(truncateWords('{"error":"no_match","reason":"no_match_at_all"}', 30)).toBe('{"error":"no_match","reason":…');
    expect(truncateWords('x'.repeat(50), 10)).toBe(`${'x'.repeat(9)}…`);
  });
});

describe('#41.20 the missing-secret error and the guide give a rotation in the same order', () => {
  it('{ secrets: [new, old] }, the current one first, as the rest of the code takes it (the first signs)', () => {
    expect(() => new Webhooks({} as never)).toThrow('{ secrets: [new, old] }');
    const readme = readFileSync(resolve(import.meta.dirname, '../README.md'), 'utf8');
    expect(readme).not.toContain('[old, new]');
  });
});

describe('#41.12 secret show warns, as listen does, when others can read secrets.json', () => {
  it('the warning on stderr, the secret alone on stdout', async () => {
    const dir = tempDir();
    const env = { WXHOOKS_CONFIG_DIR: dir, WX_BASE_URL: 'http://127.0.0.1:9' };
    expect((await runCli(['secret', 'set', '7', '-'], { env, stdin: `${OTHER}\n` })).code).toBe(0);
    chmodSync(join(dir, 'secrets.json'), 0o644);
    const r = await runCli(['secret', 'show', '7'], { env });
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`${OTHER}\n`);
    expect(r.stderr).toMatch(/^warning: the secret store .*secrets\.json can be read by other users \(mode 644\): chmod 600 /m);
  });
});
