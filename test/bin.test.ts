import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from './helpers/cli.js';

// bin/wxhooks.js in a clone that is not built, or not installed: it says what to run (exit 1), not Node's
// stack for a module it cannot find (#41.20). The process is the point: its words and exit code. And a
// clone's `npm ci` says nothing of install scripts nobody reviewed.

const ROOT = resolve(import.meta.dirname, '..');

function run(bin: string, args = ['auth']): Promise<{ code: number; stderr: string; stdout: string }> {
  return new Promise((done) => {
    execFile(process.execPath, [bin, ...args], (err, stdout, stderr) => done({ code: err ? Number(err.code) : 0, stdout, stderr }));
  });
}

/** A clone's bin/ alone, with what its dist/ holds (if anything). */
function clone(dist?: string): string {
  const dir = tempDir('wxhooks-clone-');
  mkdirSync(join(dir, 'bin'));
  cpSync(join(ROOT, 'bin', 'wxhooks.js'), join(dir, 'bin', 'wxhooks.js'));
  cpSync(join(ROOT, 'bin', 'package.json'), join(dir, 'bin', 'package.json'));
  cpSync(join(ROOT, 'package.json'), join(dir, 'package.json'));
  if (dist !== undefined) {
    mkdirSync(join(dir, 'dist', 'bin'), { recursive: true });
    writeFileSync(join(dir, 'dist', 'bin', 'cli.js'), dist);
  }
  return join(dir, 'bin', 'wxhooks.js');
}

describe('bin/wxhooks.js', () => {
  it('not built: says to build, in one message, exit 1, no stack', async () => {
    const r = await run(clone());
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('wxhooks is not built in');
    expect(r.stderr).toContain('npm run build');
    expect(r.stderr).not.toMatch(/ERR_MODULE_NOT_FOUND|\n\s+at /);
  });

  it('built, its dependencies not installed: says to run npm ci', async () => {
    const r = await run(clone("import 'wxhooks-not-installed-package';\nexport const run = () => undefined;\n"));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('its dependencies are not installed');
    expect(r.stderr).toContain('npm ci');
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  it('--version answers from package.json before anything else loads: in a clone not built as in one built', async () => {
    const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    for (const bin of [clone(), clone("throw new Error('the CLI was loaded');\n")]) {
      for (const flag of ['--version', '-V']) expect(await run(bin, [flag])).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' });
    }
  });

  it('built: runs the CLI', async () => {
    const r = await run(clone("export const run = async () => void process.stdout.write('ran\\n');\n"));
    expect([r.code, r.stdout]).toEqual([0, 'ran\n']);
  });
});

describe('a clone', () => {
  it('npm ci leaves no install script unreviewed: allowScripts covers every package of the lockfile that has one (sharp, which wrangler brings, denied)', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { allowScripts: Record<string, boolean> };
    const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { hasInstallScript?: boolean }> };
    const withScripts = Object.entries(lock.packages)
      .filter(([path, p]) => path !== '' && p.hasInstallScript)
      .map(([path]) => path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length));
    expect(withScripts.filter((name) => !(name in pkg.allowScripts))).toEqual([]);
    expect(pkg.allowScripts.sharp).toBe(false);
  });
});
