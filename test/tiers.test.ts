import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { expect, it } from 'vitest';

// The two tiers are told apart by where a file lives (docs/testing.md): outside test/full/, a test file
// needs nothing but `npm ci`, no privilege, and no process whose memory or signals are the point. This
// reads the fast tier's files for what only the full tier may use, so that a test put in the wrong place
// is said here, not on a newcomer's machine.

const ROOT = join(import.meta.dirname, '..');

/** What only the full tier may use, and why. */
const FULL_ONLY: [RegExp, string][] = [
  [/\b(startPostgres|sharedPostgres)\(/, 'a PostgreSQL server'],
  [/\b(launchBrowser|sharedBrowser)\(/, 'Chromium'],
  [/\b(startNats|startRedis|sharedBroker)\(|\bBROKERS(\.\w+|\[\w+\])\.(start|shared)\(/, 'a broker server'],
  [/\brunInTerminal\(|terminal\.py/, 'a pseudo-terminal (python3)'],
  [/\bexecFile(Sync)?\(\s*'(bash|zsh|fish|python3|sqlite3|npm|npx)'|\bspawn(Sync)?\(\s*'(bash|zsh|fish|python3|sqlite3|npm|npx)'/, 'a shell, sqlite3 or npm'],
  [/\blimits:\s*'/, 'bash and ulimit'],
  [/\bsmallDisk\(|\bchownSync\(|\buid:\s/, 'root (a mount, another user)'],
  [/\bmemoryOf\(/, "a process's memory"],
  [/'\/usr\/bin\/time'|'wrangler'|\['pack'/, 'a program or packaging'],
];

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return e.name === 'full' || e.name === 'helpers' || e.name === 'fixtures' ? [] : testFiles(path);
    return e.name.endsWith('.test.ts') ? [path] : [];
  });
}

it('no file of the fast tier (test/ outside test/full/) uses what only the full tier may', () => {
  const files = testFiles(join(ROOT, 'test')).filter((f) => f !== import.meta.filename); // this file names them all
  expect(files.length).toBeGreaterThan(30);
  const misplaced = files.flatMap((file) => {
    const text = readFileSync(file, 'utf8');
    return FULL_ONLY.filter(([pattern]) => pattern.test(text)).map(([, what]) => `${relative(ROOT, file)}: ${what} (move the test to test/full/)`);
  });
  expect(misplaced).toEqual([]);
});

it('the fast project leaves test/full/ out, and the full project takes it whole', () => {
  const config = readFileSync(join(ROOT, 'vitest.config.ts'), 'utf8');
  expect(config).toMatch(/name: 'fast',\s+include: \['test\/\*\*\/\*\.test\.ts'\],\s+exclude: \['test\/full\/\*\*'\]/);
  expect(config).toMatch(/name: 'full', include: \['test\/full\/\*\*\/\*\.test\.ts'\]/);
});
