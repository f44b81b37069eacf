import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { expect, it } from 'vitest';
import { freePort } from '../scripts/harness.js';
import { latestCycle } from '../src/vocabulary.js';
import { runCli, tempDir } from './helpers/cli.js';
import { startInProcess } from './helpers/context.js';
import { startCli } from './helpers/process.js';
import { sendJson, startServer } from './helpers/server.js';

// The guide docs/nothing-missed.md: its sh blocks marked as tested, their `wxhooks` lines run as written.
// Only what cannot be fixed is swapped: the ports (for free ones), `localhost:3000` (for an app of the
// test's own), the emulator's retry delays (10ms, so that the given-up hours are given up at once), and the
// date of the run the guide names (for the run the emulator publishes today).

const GUIDE = readFileSync(resolve(import.meta.dirname, '../docs/nothing-missed.md'), 'utf8');

/** The `wxhooks …` lines of the sh block that follows `after` in the guide, comments and redirections dropped. */
function commandsAfter(after: string): string[][] {
  const from = GUIDE.indexOf(after);
  expect(from, `the guide has "${after}"`).toBeGreaterThan(-1);
  const block = /```sh\n([\s\S]*?)```/.exec(GUIDE.slice(from))![1]!;
  return block
    .split('\n')
    .map((l) =>
      l
        .replace(/#.*$/, '')
        .replace(/\s>.*$/, '')
        .trim(),
    )
    .filter((l) => l.startsWith('wxhooks '))
    .map((l) => l.split(/\s+/).slice(1));
}

it('every sh block of the guide says whether a test runs it', () => {
  const blocks = [...GUIDE.matchAll(/(.*)\n```sh\n/g)].map((m) => m[1]!);
  expect(blocks.length).toBeGreaterThan(0);
  for (const before of blocks) expect(before).toMatch(/^<!-- (tested: test\/[\w./-]+\.test\.ts|not tested: .+) -->$/);
  for (const [, file] of GUIDE.matchAll(/<!-- tested: (test\/[\w./-]+\.test\.ts) -->/g)) expect(file).toBe('test/nothing-missed.e2e.test.ts');
});

it('try it with the emulator: missing while nothing listens, caught up through the listen once, then nothing missing; the CI lines', async () => {
  const [emulator, create, trigger, reconcile, listen, catchUp, again] = commandsAfter('## Try it with the emulator');
  expect([emulator![0], create![0], trigger![0], reconcile![0], listen![0], catchUp![0], again![0]]).toEqual(['emulator', 'webhook', 'trigger', 'reconcile', 'listen', 'reconcile', 'reconcile']);
  const [ci, oneRun] = commandsAfter('**In CI**');
  const emulatorPort = String(await freePort());
  const listenPort = String(await freePort());
  const swap = (args: string[]) => args.map((a) => a.replace('8787', listenPort).replace('1s,1s,1s', '10ms,10ms,10ms'));
  const dir = tempDir();
  const app = await startServer((_req, res) => sendJson(res, 200, { ok: true }));
  const emu = startCli([...swap(emulator!), '--port', emulatorPort], { WXHOOKS_CONFIG_DIR: dir });
  try {
    const exportLine = await emu.waitFor<string>((l) => typeof l === 'string' && l.trim().startsWith('export WX_BASE_URL='));
    const env: Record<string, string> = { WXHOOKS_CONFIG_DIR: dir };
    for (const [, k, v] of exportLine.matchAll(/(\w+)=(\S+)/g)) env[k!] = v!;

    const created = await runCli(swap(create!), { env });
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toContain('Created webhook 1'); // the id the guide's next lines use
    expect((await runCli(trigger!, { env })).code).toBe(0);
    // nothing listens: each of the three hours is tried four times, then given up
    await expect
      .poll(
        async () => {
          const r = await fetch(`${env.WX_BASE_URL}/emulator/v1/deliveries`, { headers: { authorization: `Bearer ${env.WX_API_KEY}` } });
          return ((await r.json()) as { deliveries: { next_attempt_at?: string }[] }).deliveries.filter((d) => d.next_attempt_at === undefined).length;
        },
        { interval: 20, timeout: 10_000 },
      )
      .toBe(3);

    const missing = await runCli(reconcile!, { env });
    expect(missing.code, missing.stderr).toBe(11);
    expect(missing.stdout).toMatch(/3 available, 0 delivered, 3 missing/);

    const running = startInProcess(
      swap(listen!)
        .map((a) => a.replace('http://localhost:3000', app.url))
        .concat(['--port', listenPort]),
      { env },
    );
    try {
      await running.waitForStderr('Ready.');
      const caught = await runCli(catchUp!, { env });
      expect(caught.code, caught.stderr).toBe(0);
      expect(caught.stdout).toMatch(/Catch-ups \(via listen \d+ at http:\/\/127\.0\.0\.1:\d+\/\)/);
      expect(app.requests.map((r) => [(r.json as { data: { forecast_hour: number } }).data.forecast_hour, (r.json as { catch_up?: boolean }).catch_up])).toEqual([
        [0, true],
        [6, true],
        [12, true],
      ]);
      const none = await runCli(again!, { env });
      expect(none.code, none.stderr).toBe(0);
      expect(none.stdout).toContain('Nothing missing.');

      // the CI lines
      const gate = await runCli(ci!, { env });
      expect(gate.code, gate.stderr).toBe(0);
      expect(JSON.parse(gate.stdout)).toMatchObject({ webhook_id: '1', missing: 0 });
      const run = await runCli(
        oneRun!.map((a) => a.replace('2026-11-22T00:00:00Z', latestCycle())),
        { env },
      );
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toMatch(/3 available, 3 delivered/);
      expect(app.requests).toHaveLength(3); // nothing handed over twice
    } finally {
      await running.stop();
    }
  } finally {
    await emu.stop();
    await app.close();
  }
});
