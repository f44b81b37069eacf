import { execFile } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';

// Every handler example (examples/, which docs/library.md shows word for word: test/full/runtimes.e2e.test.ts) is
// compiled as a user's `tsc --strict` would check it (checkJs), against the package as built (`wxhooks` and
// `wxhooks/web` resolved through package.json's exports to dist/*.d.ts), by the repository's tsc (TypeScript 7).

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const run = promisify(execFile);

it('the handler examples compile with tsc --strict: what a user copies type-checks', async () => {
  const files = readdirSync(`${ROOT}examples`)
    .filter((f) => f.endsWith('.js'))
    .map((f) => `examples/${f}`);
  expect(files.length).toBeGreaterThanOrEqual(6);
  const flags = [
    '--ignoreConfig',
    '--strict',
    '--allowJs',
    '--checkJs',
    '--noEmit',
    '--skipLibCheck',
    '--module',
    'nodenext',
    '--moduleResolution',
    'nodenext',
    '--target',
    'es2022',
    '--types',
    'node',
  ];
  const tsc = `${ROOT}node_modules/typescript/bin/tsc`;
  const r = await run(process.execPath, [tsc, ...flags, ...files, 'test/fixtures/runtimes.d.ts'], { cwd: ROOT }).then(
    () => ({ code: 0, problems: '' }),
    (e: { code: number; stdout: string }) => ({ code: e.code, problems: e.stdout }),
  );
  expect(r.problems).toBe('');
  expect(r.code).toBe(0);
}, 60_000);
