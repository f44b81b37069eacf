import { spawnSync } from 'node:child_process';
import { mkdirSync, symlinkSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { expect, it } from 'vitest';
import { COMPONENTS, missingComponents } from './global-setup.js';
import { tempDir } from '../helpers/cli.js';

// Before the full tier's first test, what it drives is checked (#34, section 5): one message naming what
// is missing and how to get it, rather than dozens of failures. The fast tier needs none of it (#42).

it('here, nothing is missing', () => {
  expect(missingComponents()).toBeUndefined();
});

it('a machine without the programs on the PATH, nor the PostgreSQL binaries: each named once, with how to get it', () => {
  const empty = tempDir();
  const message = missingComponents({ PATH: empty, PG_BIN: join(empty, 'none') })!;
  for (const name of ['bash', 'zsh', 'fish', 'python3', 'nats-server', 'redis-server']) expect(message).toContain(`  - ${name} (`);
  expect(message).toContain('- PostgreSQL server binaries (initdb, postgres) (the shared-store tests start a throwaway server): get it with apt-get install postgresql, or set PG_BIN');
  expect(message).toContain('get it with apt-get install zsh');
  expect(message).toContain('.ci/run installs what is missing');
  expect(message.split('\n')).toHaveLength(1 + 8 + 1);
  // and what npm brings is not asked of apt-get
  expect(COMPONENTS.filter((c) => c.how === 'npm ci').map((c) => c.name)).toEqual(['deno', 'bun', 'workerd']);
});

/** vitest in a process of its own, on a machine whose PATH holds Node and nothing else. */
function vitestWithOnlyNode(args: string[]) {
  const bin = tempDir();
  mkdirSync(join(bin, 'only-node'));
  symlinkSync(process.execPath, join(bin, 'only-node', 'node'));
  const root = resolve(import.meta.dirname, '../..');
  return spawnSync(process.execPath, [join(root, 'node_modules/vitest/vitest.mjs'), 'run', ...args], {
    cwd: root,
    env: { PATH: join(bin, 'only-node'), HOME: process.env.HOME },
    encoding: 'utf8',
  });
}

it('npm run test:all on such a machine stops at once, with that one message, and runs no test', () => {
  const r = vitestWithOnlyNode(['--project', 'full', 'test/full/runs-rules.test.ts']);
  expect(r.status).toBe(1);
  expect(r.stderr).toMatch(/npm run test:all drives 7 programs that are not on this machine:\n {2}- bash/);
  expect(r.stderr).toContain("- zsh (the completion tests run zsh's own completion): get it with apt-get install zsh");
  expect(r.stderr).not.toMatch(/Error|at .*global-setup/);
  expect(r.stdout).not.toContain('passed');
}, 60_000); // a vitest of its own

it('npm test on such a machine runs: the fast tier asks for none of them', () => {
  const r = vitestWithOnlyNode(['--project', 'fast', 'test/util.test.ts', 'test/signing.test.ts']);
  expect(r.stderr).not.toContain('drives');
  expect(r.status, r.stdout + r.stderr).toBe(0);
  expect(r.stdout.replace(/\u001b\[[0-9;]*m/g, '')).toMatch(/Test Files {2}2 passed \(2\)/);
}, 60_000); // a vitest of its own
