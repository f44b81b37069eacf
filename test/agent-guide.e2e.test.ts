import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli, tempDir } from './helpers/cli.js';
import { post } from './helpers/http.js';
import { startMcp, type McpSession } from './helpers/mcp.js';
import { startCli, type Running } from './helpers/process.js';
import { signed } from './helpers/receiver.js';
import { sendJson, startServer, type TestServer } from './helpers/server.js';

// docs/agent.md as a reader follows it: its sh block run as written (its fixed ports swapped for free
// ones, localhost:3000 for an app of the test's own), and the server its client configurations start.

const GUIDE = readFileSync(resolve(import.meta.dirname, '../docs/agent.md'), 'utf8');
const SECRET = `whsec_${Buffer.alloc(32, 11).toString('base64')}`;

/** Each fenced block of the guide: its language, its text, and the line before it. */
const blocks = [...GUIDE.matchAll(/(?:^|\n)([^\n]*)\n```(\w*)\n([\s\S]*?)```/g)].map((m) => ({ before: m[1]!, lang: m[2]!, text: m[3]! }));

let listen: Running | undefined;
let app: TestServer | undefined;
let session: McpSession | undefined;
afterAll(async () => {
  await session?.close();
  await listen?.stop();
  await app?.close();
});

describe('docs/agent.md', () => {
  it('every sh block says which test runs it, or why none does', () => {
    const sh = blocks.filter((b) => b.lang === 'sh');
    expect(sh.length).toBeGreaterThan(0);
    for (const b of sh) expect(b.before).toMatch(/^<!-- (tested: test\/[\w.-]+\.test\.ts|not tested: .+) -->$/);
  });

  it('each client configuration starts the installed binary: "command": "wxhooks", "args": ["mcp", …]', () => {
    const configs = blocks.filter((b) => b.lang === 'json').map((b) => JSON.parse(b.text) as { mcpServers?: Record<string, unknown>; servers?: Record<string, unknown> });
    expect(configs.length).toBeGreaterThanOrEqual(3);
    for (const c of configs) {
      const entry = (c.mcpServers ?? c.servers)!.wxhooks as { command: string; args: string[]; type?: string };
      expect(entry).toMatchObject({ command: 'wxhooks', args: ['mcp'] });
      if (c.servers) expect(entry.type).toBe('stdio'); // VS Code's form
    }
    expect(GUIDE).not.toMatch(/"command":\s*"npx"/);
  });

  it('the start, as written: a listen --inspect, then the server the client starts finds it and reads what it received', async () => {
    const block = blocks.find((b) => b.before === '<!-- tested: test/agent-guide.e2e.test.ts -->' && b.lang === 'sh')!;
    const lines = block.text
      .split('\n')
      .map((l) => l.replace(/#.*$/, '').trim())
      .filter(Boolean);
    const [listenLine, clientLine] = lines;
    expect(listenLine).toMatch(/^wxhooks listen .*--inspect &$/);
    expect(clientLine).toBe('claude mcp add wxhooks -- wxhooks mcp');
    const server = clientLine!.split(' -- ')[1]!.split(' ');
    expect(server.slice(0, 2)).toEqual(['wxhooks', 'mcp']);

    const dir = tempDir();
    // the service is not needed here: listen says it could not look the webhook up, and listens anyway
    const env = { WXHOOKS_CONFIG_DIR: dir, WX_BASE_URL: 'http://127.0.0.1:9', WX_API_KEY: `wb_${Buffer.from('acme:0123456789abcdef0123456789abcdef').toString('base64')}` };
    expect((await runCli(['secret', 'set', '7', '-'], { env, stdin: `${SECRET}\n` })).code).toBe(0);
    app = await startServer((_req, res) => sendJson(res, 200, { ok: true }));
    const args = listenLine!
      .replace(/ &$/, '')
      .split(/\s+/)
      .slice(1)
      .map((a) => a.replace('http://localhost:3000', app!.url))
      .flatMap((a) => (a === '--inspect' ? ['--inspect', '127.0.0.1:0'] : [a]));
    listen = startCli([...args, '--port', '0', '--json'], env);
    const receiver = (await listen.waitFor<{ event?: string; url: string }>((v) => v.event === 'listening')).url;
    await listen.waitFor<{ event?: string }>((v) => v.event === 'inspector');

    session = await startMcp(server.slice(2), env);
    const { value: status } = await session.call('status');
    expect(status.attached).toMatchObject({ kind: 'listen', listen: { pid: listen.child.pid, webhook_id: '7' }, replay_to: `${app.url}/hooks` });
    const d = signed('trg_guide_1', { secret: SECRET });
    expect((await post(receiver, d.headers, d.body)).status).toBe(200);
    const { value: came, marked } = await session.call('wait_for_delivery', { after_id: 0, timeout_seconds: 30 });
    expect(marked).toBe(true);
    expect(came).toMatchObject({ arrived: true, delivery: { trigger_id: 'trg_guide_1', outcome: 'accepted' } });
  }, 120_000);
});
