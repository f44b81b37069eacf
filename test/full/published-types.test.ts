import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/cli.js';

// The published types compile alone (#41.10): an app with only wxhooks installed (its package.json and
// dist/, as npm unpacks it, and its dependencies, but none of our devDependencies' types, @types/pg among
// them), compiled with `tsc --strict` and no skipLibCheck, using every entry. (dist/ is built by `npm test`.)

const ROOT = resolve(import.meta.dirname, '..', '..');
const run = promisify(execFile);

const APP = `import { MemoryStore, Webhooks, createNodeMiddleware, openStore, signDelivery, verifyDelivery, type OpenStoreOptions, type Receipt, type WebhookEvent } from 'wxhooks';
import { Webhooks as WebWebhooks, createWebHandler, verifyDelivery as verifyOnWeb } from 'wxhooks/web';
import { createServer } from 'node:http';

const webhooks = new Webhooks({ secret: 'whsec_x', store: new MemoryStore({ leaseMs: 2000 }) });
webhooks.on('forecast_hour.available', (event) => {
  const hour: number = event.payload.data.forecast_hour;
  return hour;
});
webhooks.onAny((event: WebhookEvent) => event.replay?.of);
createServer(createNodeMiddleware(webhooks, { path: '/webhooks' }));
const options: OpenStoreOptions = { dir: '.', leaseMs: 2000 };
void openStore('file', options);
const headers = signDelivery({ secret: 'whsec_x', body: '{}', triggerId: 'trg_1' });
const checked = verifyDelivery({ secret: 'whsec_x', headers, body: '{}' });
if (checked.ok) void checked.layout;
const handle: (request: Request) => Promise<Response> = createWebHandler(new WebWebhooks({ secret: 'whsec_x' }));
void handle;
void verifyOnWeb({ secret: 'whsec_x', headers, body: '{}' });
export const receipt = (r: Receipt) => r.status;
`;

describe('the published types', () => {
  it('an app with only wxhooks installed compiles with tsc --strict, no skipLibCheck', async () => {
    const app = tempDir('wxhooks-types-app-');
    const modules = join(app, 'node_modules');
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    mkdirSync(join(modules, 'wxhooks'), { recursive: true });
    // copied, not linked: a link would let the compiler find our own node_modules (and @types/pg) from dist/
    cpSync(join(ROOT, 'package.json'), join(modules, 'wxhooks', 'package.json'));
    cpSync(join(ROOT, 'dist'), join(modules, 'wxhooks', 'dist'), { recursive: true });
    // what npm installs with it: its dependencies; and the app's own Node types
    for (const dep of [...Object.keys(pkg.dependencies), '@types/node', 'undici-types']) {
      mkdirSync(dirname(join(modules, dep)), { recursive: true });
      symlinkSync(join(ROOT, 'node_modules', dep), join(modules, dep));
    }
    writeFileSync(join(app, 'package.json'), JSON.stringify({ type: 'module' }));
    writeFileSync(join(app, 'app.ts'), APP);
    writeFileSync(
      join(app, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { strict: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', lib: ['es2022', 'dom'], noEmit: true, types: ['node'] },
        files: ['app.ts'],
      }),
    );
    const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
    const r = await run(process.execPath, [tsc, '-p', app]).then(
      () => ({ code: 0, out: '' }),
      (e: { code: number; stdout: string }) => ({ code: e.code, out: e.stdout }),
    );
    expect(r.out).toBe('');
    expect(r.code).toBe(0);
  }, 120_000);
});
