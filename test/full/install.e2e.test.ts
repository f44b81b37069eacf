import { execFile, spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, symlinkSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { eachLine, freePort } from '../../scripts/harness.js';
import { cleanEnv, tempDir } from '../helpers/cli.js';
import { doc, shBlockAfter } from '../helpers/guide.js';

// wxhooks installed as a user installs a tool (#34, section 5), as the README's Install block says:
// `npm pack`, then `npm install -g` of the tarball into a prefix of the test's own, then the installed
// binary, not the clone's. The block's lines are run as written but for what a test must add: the clone
// is this one (its `npm ci` done), `--ignore-scripts` (`npm test` built dist/), the prefix, and npm's
// cache (--prefer-offline: what is cached is not asked for again).

const ROOT = resolve(import.meta.dirname, '../..');
const run = promisify(execFile);
const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };

let tarball: string;
let prefix: string;
let installed: { stdout: string; stderr: string };
/** The environment of a user with the prefix's bin on their PATH, and a store folder of their own. */
let env: Record<string, string>;

beforeAll(async () => {
  const out = tempDir('wxhooks-pack-');
  // dist/ is built by `npm test`; --ignore-scripts keeps prepack from rebuilding it under the other tests
  const packed = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', out], { cwd: ROOT, env: cleanEnv() });
  tarball = join(out, (JSON.parse(packed.stdout) as { filename: string }[])[0]!.filename);
  prefix = tempDir('wxhooks-prefix-');
  installed = await run('npm', ['install', '--global', '--prefix', prefix, tarball, '--prefer-offline', '--no-audit', '--no-fund'], { env: cleanEnv(), maxBuffer: 16 * 1024 * 1024 });
  env = cleanEnv({ PATH: `${join(prefix, 'bin')}:${process.env.PATH}`, WXHOOKS_CONFIG_DIR: tempDir(), NO_COLOR: '1' });
}, 240_000);

describe('npm pack, then npm install -g of the tarball', () => {
  it("the README's Install block is what this test runs: clone, npm ci && npm pack, npm install -g the tarball, wxhooks --version", () => {
    const block = shBlockAfter(doc('README.md'), '## Install')
      .body.split('\n')
      .map((l) => l.split('#')[0]!.trim());
    expect(block).toEqual(['git clone <this repository> wxhooks && cd wxhooks', 'npm ci && npm pack', `npm install -g ./wxhooks-${version}.tgz`, 'wxhooks --version']);
    expect(tarball.endsWith(`wxhooks-${version}.tgz`)).toBe(true);
  });

  it('the tarball holds the built CLI and library, the README and its guides (docs/), and nothing of the sources or tests', async () => {
    const { stdout } = await run('tar', ['tzf', tarball]);
    const files = stdout
      .trim()
      .split('\n')
      .map((f) => f.replace(/^package\//, ''));
    for (const f of [
      'package.json',
      'README.md',
      'docs/library.md',
      'docs/commands/listen.md',
      'bin/wxhooks.js',
      'dist/bin/cli.js',
      'dist/bin/help.json',
      'dist/index.js',
      'dist/index.d.ts',
      'dist/web.js',
      'dist/inspector/app.js',
    ])
      expect(files).toContain(f);
    expect(files.filter((f) => !/^(bin|dist|docs)\//.test(f)).sort()).toEqual(['README.md', 'package.json']);
    // the README's links lead somewhere in an installed package too: every guide, the command reference, the screenshots
    const guides = readdirSync(join(ROOT, 'docs'), { recursive: true, withFileTypes: true })
      .filter((d) => d.isFile())
      .map((d) => relative(ROOT, join(d.parentPath, d.name)));
    expect(files.filter((f) => f.startsWith('docs/')).sort()).toEqual(guides.sort());
    // no script of its own runs at install (npm 11 warns of one its allowScripts does not cover): prepack builds before packing instead
    const pkg = JSON.parse((await run('tar', ['xzOf', tarball, 'package/package.json'])).stdout) as { scripts: Record<string, string> };
    expect(Object.keys(pkg.scripts).filter((s) => /^(pre|post)?install$|^prepare$/.test(s))).toEqual([]);
    expect(installed.stderr).not.toContain('install-scripts');
  });

  it('installs a wxhooks that runs from the prefix: --version, and with npx', async () => {
    const which = await run('sh', ['-c', 'command -v wxhooks'], { env });
    expect(which.stdout.trim()).toBe(join(prefix, 'bin', 'wxhooks'));
    expect((await run('wxhooks', ['--version'], { env })).stdout.trim()).toBe(version);
    // npx finds the globally installed one (its prefix), installing nothing
    const project = tempDir();
    expect((await run('npx', ['--no-install', 'wxhooks', '--version'], { cwd: project, env: { ...env, npm_config_prefix: prefix } })).stdout.trim()).toBe(version);
  }, 60_000);

  it('a short emulator flow from the installed binary: emulator, webhook create, listen, trigger', async () => {
    const emulator = spawn('wxhooks', ['emulator', '--port', '0', '--in-memory', '--json'], { env });
    try {
      const info = await new Promise<{ base_url: string; api_key: string }>((resolveInfo, reject) => {
        eachLine(emulator.stdout, (line) => resolveInfo(JSON.parse(line) as { base_url: string; api_key: string }));
        emulator.on('close', (code) => reject(new Error(`the emulator exited ${code}`)));
      });
      const e = { ...env, WX_BASE_URL: info.base_url, WX_API_KEY: info.api_key };
      const port = await freePort();
      const hook = JSON.parse((await run('wxhooks', ['webhook', 'create', '--url', `http://127.0.0.1:${port}/`, '--subscribe', 'forecast_hour.available', '--json'], { env: e })).stdout) as {
        id: string;
      };
      const listen = spawn('wxhooks', ['listen', '--webhook', hook.id, '--port', String(port), '--exit-after', '1'], { env: e });
      // from the start: listen may be gone before the trigger command is
      const exited = new Promise<number | null>((done) => listen.on('close', done));
      let said = '';
      let told = '';
      listen.stdout.setEncoding('utf8').on('data', (d: string) => (said += d));
      await new Promise<void>((ready, reject) => {
        listen.stderr.setEncoding('utf8').on('data', (d: string) => (told += d).includes('Ctrl-C to stop.') && ready());
        listen.on('close', (code) => reject(new Error(`listen exited ${code}: ${told}`)));
      });
      await run('wxhooks', ['trigger', 'forecast_hour.available', '--forecast-hour', '6'], { env: e });
      expect(await exited).toBe(0);
      expect(said).toMatch(/✓ 200 {2}forecast_hour\.available .* \+6h/);
    } finally {
      emulator.kill('SIGTERM');
    }
  }, 120_000); // five processes of the installed binary

  it('the library from the installed package: wxhooks in Node, wxhooks/web for any runtime', async () => {
    const app = tempDir();
    mkdirSync(join(app, 'node_modules'));
    symlinkSync(join(prefix, 'lib', 'node_modules', 'wxhooks'), join(app, 'node_modules', 'wxhooks'));
    const code = "const n = await import('wxhooks'); const w = await import('wxhooks/web'); console.log(typeof n.verifyDelivery, typeof w.createWebHandler);";
    expect((await run(process.execPath, ['--input-type=module', '-e', code], { cwd: app, env })).stdout.trim()).toBe('function function');
  });
});
