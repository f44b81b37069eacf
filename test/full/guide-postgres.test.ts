import { afterAll, beforeAll, expect, it } from 'vitest';
import { freePort } from '../../scripts/harness.js';
import { sharedPostgres, type SharedPostgres } from '../helpers/services.js';
import { runCli, tempDir } from '../helpers/cli.js';
import { startInProcess, type InProcessRun } from '../helpers/context.js';
import { doc, shBlockAfter, swapped, wxhooksCommands } from '../helpers/guide.js';
import { sendJson, startServer, type TestServer } from '../helpers/server.js';

// docs/postgres.md's block, its lines run as written against a real PostgreSQL (a database of its own on
// the run's server) and the emulator: WXHOOKS_STORE_URL names that database, the fixed ports are
// swapped for free ones, and `localhost:3000` for an app of the test's own. Two receivers of webhook 1
// share the database: what one processed, the other answers as a duplicate; the history and the runs
// are read from the store.

let server: SharedPostgres;
const stops: (() => Promise<unknown>)[] = [];
beforeAll(async () => {
  server = await sharedPostgres();
}, 60_000);
afterAll(async () => {
  for (const stop of stops.reverse()) await stop();
  await server?.remove();
});

it('two instances on one PostgreSQL: one processes each delivery, the other answers it as a duplicate; deliveries and runs read the store', async () => {
  const block = shBlockAfter(doc('docs/postgres.md'), 'Then on each instance').body;
  expect(block.split('\n')[0]).toMatch(/^export WXHOOKS_STORE_URL='postgres:\/\/\S+'$/);
  const [first, second, list, runs, ...rest] = wxhooksCommands(block, { WXHOOKS_STORE_URL: server.url });
  expect(rest).toEqual([]);

  const dir = tempDir();
  const emuPort = String(await freePort());
  const emulator = startInProcess(['emulator', '--port', emuPort, '--in-memory'], { env: { WXHOOKS_CONFIG_DIR: dir } });
  stops.push(() => emulator.stop());
  const exported = await emulator.waitFor<string>((l) => typeof l === 'string' && l.trim().startsWith('export WX_BASE_URL='));
  const env: Record<string, string> = { WXHOOKS_CONFIG_DIR: dir, WXHOOKS_STORE_URL: server.url };
  for (const [, k, v] of exported.matchAll(/(\w+)=(\S+)/g)) env[k!] = v!;
  const app: TestServer = await startServer((req, res) => sendJson(res, 200, { stored: (req.json as { trigger_id: string }).trigger_id }));
  stops.push(() => app.close());
  const [p1, p2, inspect] = [String(await freePort()), String(await freePort()), String(await freePort())];
  const swaps = { '8080': p1, '8081': p2, 'http://localhost:3000': app.url };

  // webhook 1 delivers to the second instance (a load balancer would pick either)
  expect((await runCli(['webhook', 'create', '--url', `http://127.0.0.1:${p2}/`, '--subscribe', 'forecast_hour.available', '--subscribe', 'initialization_time.available'], { env })).code).toBe(0);
  const start = async (args: string[]): Promise<InProcessRun> => {
    const run = startInProcess(args, { env });
    stops.push(() => run.stop());
    await run.waitForStderr('Ready.');
    return run;
  };
  await start(swapped(first!, swaps));
  expect(second!.at(-1)).toBe('--inspect');
  const two = await start([...swapped(second!, swaps), `127.0.0.1:${inspect}`]);

  expect((await runCli(['trigger', 'run', '--hours', '0-12/6'], { env })).code).toBe(0);
  await two.waitFor<string>(() => two.lines().filter((l) => typeof l === 'string' && l.includes('→ app 200')).length >= 4);
  expect(app.requests).toHaveLength(4);

  // the same delivery at the first instance, signed afresh as a retry is: a duplicate there, not forwarded
  const forecast = app.requests.find((r) => (r.json as { type: string }).type === 'forecast_hour.available')!.json as { trigger_id: string; subscription_id: string };
  const again = await runCli(['send', '--to', `http://127.0.0.1:${p1}/`, '--webhook', '1', '--trigger-id', forecast.trigger_id, '--subscription-id', forecast.subscription_id, '--json'], { env });
  expect(again.code).toBe(0);
  expect(JSON.parse(again.stdout)).toMatchObject({ status: 200, body: '{"ok":true,"duplicate":true}' });
  expect(app.requests).toHaveLength(4);

  // what the instances answered, and the run, from the store
  const listed = await runCli(list!, { env });
  expect(listed.code).toBe(0);
  for (const r of app.requests) expect(listed.stdout).toContain((r.json as { trigger_id: string }).trigger_id);
  const seen = await runCli([...runs!, '--json'], { env });
  expect(seen.code).toBe(0);
  expect(JSON.parse(seen.stdout)).toMatchObject({ runs: [{ model: 'wm-6', missing: [], complete: true }] });
}, 60_000);
