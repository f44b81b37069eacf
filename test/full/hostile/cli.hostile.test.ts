import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../../scripts/harness.js';
import { signDelivery } from '../../../src/signing/index.js';
import { runInTerminal } from '../../helpers/cli.js';
import { post } from '../../helpers/http.js';
import { sendJson, startServer, type TestServer } from '../../helpers/server.js';

// Escape sequences from a service or a delivery, shown on a real terminal (a pseudo-terminal, through
// python3). The CLI's other hostile cases: test/hostile/cli.hostile.test.ts.

const ESC = '\u001b';
const HOSTILE = `${ESC}]0;owned${'\u0007'}${ESC}[2J${ESC}]8;;http://evil${ESC}\\click${ESC}]8;;${ESC}\\\u009b31m`;

describe('terminal safety: data from the service or a delivery is shown escaped, on a real terminal', () => {
  let svc: TestServer;
  beforeAll(async () => {
    svc = await startServer((req, res) => {
      if (req.path === '/debug/v1/auth_status') return sendJson(res, 200, { authed: true, client_id: `client${HOSTILE}` });
      if (req.path === '/webhooks/v1/7')
        return sendJson(res, 200, {
          id: 7,
          url: `https://example.com/${HOSTILE}`,
          name: `name${HOSTILE}`,
          note: `note\n${HOSTILE}`,
          subscriptions: [{ id: 1, subscription_type: `t${HOSTILE}`, note: HOSTILE }],
        });
      if (req.path === '/webhooks/v1') return sendJson(res, 200, { webhooks: [{ id: 7, url: 'https://example.com/', name: `n${HOSTILE}`, subscriptions: [] }], total: 1 });
      return sendJson(res, 422, { detail: `refused ${HOSTILE}` });
    });
  });
  afterAll(() => svc.close());

  const raw = [`${ESC}]0;`, `${ESC}[2J`, `${ESC}]8;;`, '\u009b'];

  it.each([[['webhook', 'get', '7']], [['webhook', 'list']], [['auth', 'status']], [['subscription', 'add', '7', 'degree_days.available']]])('%j', async (args) => {
    const { shown } = await runInTerminal(args, '', '', { env: { WX_API_KEY: 'k', WX_BASE_URL: svc.url } });
    for (const sequence of raw) expect(shown).not.toContain(sequence);
    expect(shown).toContain('\\x1b]0;owned\\x07');
  });

  it('listen: the fields of a signed delivery, and an unsigned header echoed in a refusal', async () => {
    const secret = 'whsec_' + Buffer.alloc(32, 5).toString('base64');
    const port = await freePort();
    const running = runInTerminal(['listen', '--port', String(port), '--secret-env', 'S', '--exit-after', '1'], '', '', { env: { S: secret } });
    const url = `http://127.0.0.1:${port}/`;
    // up when it answers (a loaded machine took over 5 s to start it under a pseudo-terminal)
    for (let i = 0; i < 600; i++) {
      const up = await post(url, {}, '{}').then(
        () => true,
        () => false,
      );
      if (up) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    // unsigned: a timestamp with a C1 control character (U+009B is CSI on many terminals)
    await post(url, { 'Trigger-Id': 'x', 'Webhook-Timestamp': '\u009b2J', 'Webhook-Signature': 'v1,AAAA' }, '{}').catch(() => undefined);
    const body = Buffer.from(JSON.stringify({ type: `forecast_hour.available\n12:00:00 ✓ 200  forged${HOSTILE}`, trigger_id: `trg${HOSTILE}`, subscription_id: HOSTILE, data: { model: HOSTILE } }));
    expect((await post(url, { ...signDelivery({ secret, body, triggerId: 'trg_t' }) }, body)).status).toBe(200);
    const { code, shown } = await running;
    expect(code).toBe(0);
    for (const sequence of raw) expect(shown).not.toContain(sequence);
    expect(shown).toContain('forecast_hour.available\\n12:00:00');
  });
});
