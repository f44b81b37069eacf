import { describe, expect, it } from 'vitest';
import { runCli, tempDir } from './helpers/cli.js';
import { startCli, startCliInProcess } from './helpers/process.js';
import { freePort } from '../scripts/harness.js';
import { generateSecret } from '../src/signing/sign.js';
import { delivery, nodeFileRelay, send } from './helpers/relay.js';
import { createWebhook, relayStatus, TOKEN, until, type World, worldFor } from './helpers/relay-listen.js';

// `listen --relay`, end to end, all in this process: the emulator (the service) → the relay (its Node
// host) → `listen --relay` → an app (a server in this test), counted at the app by trigger id. (Killed
// while draining, the built binary, and the Worker in workerd: test/full/relay-listen.e2e.test.ts; its
// flags and refusals: test/relay-cli.test.ts.)

const INIT = '2026-11-24T00:00:00Z';
const listen = (w: World, args: string[]) => startCliInProcess(['listen', '--relay', w.relay.url, '--json', '--forward-to', `${w.app.url}/hooks`, ...args], w.env);

describe('listen --relay, end to end (the Node relay)', () => {
  let w: World;
  worldFor(
    () => nodeFileRelay({ token: TOKEN, maxBytes: 256 * 1024 * 1024 }),
    (made) => (w = made),
  );

  it('the one-command loop: a temporary webhook whose URL is a fresh channel; live deliveries reach the app; webhook and channel deleted on exit', async () => {
    w.got.length = 0;
    const l = listen(w, ['--subscribe', 'forecast_hour.available']);
    const created = await l.waitFor<{ event?: string; webhook_id: string; url: string }>((v) => v.event === 'webhook_created');
    const ready = await l.waitFor<{ event?: string; url: string; channel: string; port: number }>((v) => v.event === 'listening');
    expect(ready.url).toBe(`${w.relay.url}/in/${ready.channel}`);
    expect(created.url).toBe(ready.url);
    expect(ready.channel).toMatch(/^tmp-[0-9a-f]{20}$/);
    expect((await relayStatus(w)).channels.find((c) => c.channel === ready.channel)).toMatchObject({ connected: true, queued: 0 });
    const t = await runCli(['trigger', 'forecast_hour.available', '--model', 'wm-6', '--init-time', INIT, '--forecast-hour', '6', '--json'], { env: w.env });
    expect(t.code).toBe(0);
    const accepted = await l.waitFor<{ outcome?: string; forward?: { status: number } }>((v) => v.outcome === 'accepted');
    expect(accepted.forward?.status).toBe(200);
    expect(w.got).toHaveLength(1);
    expect(await l.stop('SIGINT')).toBe(130);
    expect(l.lines.map((x) => JSON.parse(x) as { event?: string }).some((e) => e.event === 'webhook_deleted')).toBe(true);
    expect((await relayStatus(w)).channels.find((c) => c.channel === ready.channel)).toBeUndefined();
    const list = await runCli(['webhook', 'list', '--json'], { env: w.env });
    expect(list.stdout).not.toContain(created.webhook_id === '' ? 'x' : ready.channel);
    expect(l.stderr() + l.lines.join('\n')).not.toContain(TOKEN);
  });

  it('--webhook ID: a lasting channel; a run sent while listen is off waits in the relay and arrives in order when it starts; one sent while it runs arrives live', async () => {
    const id = await createWebhook(w, 'http://127.0.0.1:9/placeholder');
    // the first listen opens the channel (gives the relay the stored secret) and says the URL to give the webhook
    const first = listen(w, ['--webhook', id]);
    const ready = await first.waitFor<{ event?: string; url: string; channel: string }>((v) => v.event === 'listening');
    // a name no one can work out from the webhook's id and the service's address (#41.14)
    expect(ready.channel).toMatch(new RegExp(`^wh-${id}-[0-9a-f]{20}$`));
    expect(await first.stop('SIGINT')).toBe(130);
    expect((await runCli(['webhook', 'update', id, '--url', ready.url], { env: w.env })).code).toBe(0);

    // listen is off: the run is kept by the relay (the emulator's attempts answered 200 by it)
    w.got.length = 0;
    w.hours.length = 0;
    const run = await runCli(['trigger', 'run', '--model', 'wm-6', '--init-time', INIT, '--hours', '0-48/6', '--shuffle', '--json'], { env: w.env });
    expect(run.code).toBe(0);
    const order = (JSON.parse(run.stdout) as { hours: number[] }).hours;
    expect((await relayStatus(w)).channels.find((c) => c.channel === ready.channel)?.queued).toBe(order.length + 1);
    expect(w.got).toHaveLength(0);

    const second = listen(w, ['--webhook', id]);
    try {
      await second.waitFor<{ event?: string; queued: number }>((v) => v.event === 'relay_connected' && v.queued === order.length + 1);
      await until(() => w.got.length === order.length + 1, 'the backlog');
      expect(w.hours).toEqual(order); // in the order the relay received them: the order published
      // live
      const live = await runCli(['trigger', 'forecast_hour.available', '--model', 'wm-6', '--init-time', INIT, '--forecast-hour', '54'], { env: w.env });
      expect(live.code).toBe(0);
      await until(() => w.hours.at(-1) === 54, 'the live delivery');
      expect(new Set(w.got).size).toBe(w.got.length);
      // acknowledged a moment after the app answered: the relay deletes it then
      await until(async () => (await relayStatus(w)).channels.find((c) => c.channel === ready.channel)?.queued === 0, 'the relay to be empty');
      expect((await relayStatus(w)).channels.find((c) => c.channel === ready.channel)).toMatchObject({ connected: true, queued: 0 });
    } finally {
      await second.stop('SIGINT');
    }
    // a lasting channel stays
    expect((await relayStatus(w)).channels.find((c) => c.channel === ready.channel)).toMatchObject({ connected: false, queued: 0 });
  }, 120_000);

  it('says when the relay is unreachable and when it is back (--json lines), and delivers what came meanwhile', async () => {
    const id = await createWebhook(w, 'http://127.0.0.1:9/placeholder');
    const l = listen(w, ['--webhook', id]);
    try {
      const ready = await l.waitFor<{ event?: string; url: string }>((v) => v.event === 'listening');
      await runCli(['webhook', 'update', id, '--url', ready.url], { env: w.env });
      await w.relay.crash();
      await l.waitFor<{ event?: string }>((v) => v.event === 'relay_lost');
      await l.waitFor<{ event?: string; reason: string }>((v) => v.event === 'relay_unreachable');
      await w.relay.start();
      const back = await l.waitFor<{ event?: string; down_ms: number }>((v) => v.event === 'relay_back', 60_000);
      expect(back.down_ms).toBeGreaterThan(0);
      const before = w.got.length;
      await runCli(['trigger', 'forecast_hour.available', '--model', 'wm-6', '--init-time', INIT, '--forecast-hour', '60'], { env: w.env });
      await until(() => w.got.length === before + 1, 'a delivery after the relay came back');
    } finally {
      await l.stop('SIGINT');
    }
  }, 90_000);
});

describe('doctor --relay', () => {
  let w: World;
  worldFor(
    () => nodeFileRelay({ token: TOKEN, maxBytes: 1024 * 1024 }),
    (made) => (w = made),
  );

  it("checks the relay answers, takes the token, and knows the webhook's channel; a wrong token and an unknown channel are failed checks with the fix", async () => {
    const id = await createWebhook(w, 'http://127.0.0.1:9/placeholder');
    const before = await runCli(['doctor', '--relay', w.relay.url, '--webhook', id, '--json'], { env: w.env });
    expect(before.code).toBe(7);
    const b = JSON.parse(before.stdout) as { checks: { name: string; ok: boolean; hint?: string }[] };
    expect(b.checks.find((c) => c.name === 'relay')).toMatchObject({ ok: true });
    expect(b.checks.find((c) => c.name === 'relay channel')).toMatchObject({ ok: false, hint: expect.stringContaining(`listen --relay ${w.relay.url} --webhook ${id}`) });
    const l = listen(w, ['--webhook', id]);
    const ready = await l.waitFor<{ event?: string; url: string }>((v) => v.event === 'listening');
    await l.stop('SIGINT');
    await runCli(['webhook', 'update', id, '--url', ready.url], { env: w.env });
    const after = await runCli(['doctor', '--webhook', id, '--json'], { env: { ...w.env, WXHOOKS_RELAY_URL: w.relay.url } });
    const a = JSON.parse(after.stdout) as { checks: { name: string; ok: boolean }[] };
    expect(a.checks.filter((c) => c.name.startsWith('relay'))).toEqual([expect.objectContaining({ name: 'relay', ok: true }), expect.objectContaining({ name: 'relay channel', ok: true })]);
    const wrong = await runCli(['doctor', '--relay', w.relay.url, '--json'], { env: { ...w.env, WXHOOKS_RELAY_TOKEN: 'not-the-token-at-all' } });
    expect(wrong.code).toBe(7);
    expect((JSON.parse(wrong.stdout) as { checks: { name: string; ok: boolean }[] }).checks.find((c) => c.name === 'relay')).toMatchObject({ ok: false });
    expect(wrong.stdout + wrong.stderr + after.stdout + after.stderr).not.toContain(TOKEN);
  });
});

/**
 * The hand-off between the relay and listen (#41.1): what the relay answered 200 for is either handled
 * by listen or kept at the relay as refused, never acknowledged and lost; the relay and listen verify
 * alike (listen's tolerance and secrets); and a listen that cannot start says so and never exits 0
 * (#41.4). The built binary, the Node relay in this process, the emulator as the service.
 */
describe('listen --relay: every hand-off holds (#41.1, #41.4, #41.7)', () => {
  let w: World;
  worldFor(
    () => nodeFileRelay({ token: TOKEN, maxBytes: 256 * 1024 * 1024 }),
    (made) => (w = made),
  );

  /** A webhook whose lasting channel a first listen opened (and stopped), pointed at the relay: its id, secret and inbound URL. */
  async function channelled(): Promise<{ id: string; secret: string; url: string }> {
    const id = await createWebhook(w, 'http://127.0.0.1:9/placeholder');
    const first = listen(w, ['--webhook', id]);
    const ready = await first.waitFor<{ event?: string; url: string }>((v) => v.event === 'listening');
    expect(await first.stop('SIGINT')).toBe(130);
    expect((await runCli(['webhook', 'update', id, '--url', ready.url], { env: w.env })).code).toBe(0);
    const secret = (await runCli(['secret', 'show', id], { env: w.env })).stdout.trim();
    return { id, secret, url: ready.url };
  }
  const channelOf = (url: string) => url.slice(url.lastIndexOf('/') + 1);
  const relayed = async (url: string) => (await relayStatus(w)).channels.find((c) => c.channel === channelOf(url));

  it('a stricter listen (--tolerance 60) refuses what the relay kept under 300 s: kept at the relay as refused, listed, dropped only when asked; the relay verifies with 60 s from then on', async () => {
    const { id, secret, url } = await channelled();
    const now = Math.floor(Date.now() / 1000);
    for (const age of [100, 180, 250])
      expect((await send(url, 'POST', delivery(secret, `trg_old_${age}`, { timestamp: now - age }).headers, delivery(secret, `trg_old_${age}`, { timestamp: now - age }).body)).status).toBe(200);
    const fresh = delivery(secret, 'trg_fresh');
    expect((await send(url, 'POST', fresh.headers, fresh.body)).status).toBe(200);
    w.got.length = 0;
    const strict = listen(w, ['--webhook', id, '--tolerance', '60', '--inspect', '127.0.0.1:0']);
    try {
      const page = await strict.waitFor<{ event?: string; url: string }>((v) => v.event === 'inspector');
      await strict.waitFor<{ outcome?: string }>((v) => v.outcome === 'accepted');
      await until(async () => (await relayed(url))?.refused === 3, 'three refused at the relay');
      expect(w.got).toEqual(['trg_fresh']);
      const refusedLines = strict.lines.map((l) => JSON.parse(l) as { outcome?: string; message?: string }).filter((e) => e.outcome === 'unverified');
      expect(refusedLines).toHaveLength(3);
      expect(refusedLines[0]!.message).toContain('Kept at the relay as refused delivery');
      // the inspector shows each as kept at the relay
      const api = (path: string) => fetch(new URL(path, page.url), { headers: { 'x-wxhooks-token': new URL(page.url).searchParams.get('token')! } }).then((r) => r.json());
      const rows = ((await api('/api/deliveries')) as { records: { id: number; outcome: string }[] }).records.filter((r) => r.outcome === 'unverified');
      expect(rows).toHaveLength(3);
      const shown = (await api(`/api/deliveries/${rows[0]!.id}`)) as { record: { relay_kept?: { channel: string; seq: number } } };
      expect(shown.record.relay_kept).toEqual({ channel: channelOf(url), seq: expect.any(Number) });
      expect(await relayed(url)).toMatchObject({ queued: 0, refused: 3, connected: true });
      // the relay now verifies as this listen does
      const stale = delivery(secret, 'trg_stale_now', { timestamp: now - 100 });
      expect((await send(url, 'POST', stale.headers, stale.body)).status).toBe(401);
    } finally {
      expect(await strict.stop('SIGINT')).toBe(130);
    }
    // listed, by the webhook's own secret (no relay token), and as deliveries
    const keyed = { ...w.env, WXHOOKS_RELAY_TOKEN: '' };
    const listed = await runCli(['relay', 'refused', w.relay.url, '--webhook', id, '--json'], { env: keyed });
    expect(listed.code).toBe(0);
    const refused = (JSON.parse(listed.stdout) as { refused: { seq: number; reason: string; claimed_trigger_id: string }[] }).refused;
    expect(refused.map((r) => [r.reason, r.claimed_trigger_id])).toEqual([
      ['timestamp_out_of_window', 'trg_old_100'],
      ['timestamp_out_of_window', 'trg_old_180'],
      ['timestamp_out_of_window', 'trg_old_250'],
    ]);
    const asDeliveries = await runCli(['deliveries', 'list', '--relay', w.relay.url, '--webhook', id, '--json'], { env: keyed });
    expect((JSON.parse(asDeliveries.stdout) as { deliveries: { outcome: string; ref: string }[] }).deliveries.map((d) => d.ref)).toEqual(refused.map((r) => `#${r.seq}`));
    // doctor, with the webhook's secret only, says they wait there, and how to see them
    const doctor = await runCli(['doctor', '--relay', w.relay.url, '--webhook', id, '--json'], { env: keyed });
    const checks = (JSON.parse(doctor.stdout) as { checks: { name: string; ok: boolean; hint?: string }[] }).checks;
    expect(checks.find((c) => c.name === 'relay channel')).toMatchObject({ ok: true });
    expect(checks.find((c) => c.name === 'relay refused')).toMatchObject({ ok: false, hint: expect.stringContaining(`wxhooks relay refused ${w.relay.url} --webhook ${id}`) });
    const table = await runCli(['relay', 'status', w.relay.url], { env: w.env });
    expect(table.stdout).toContain('3 refused, kept until dropped');
    // dropped only when asked
    const none = await runCli(['relay', 'drop', w.relay.url, '--webhook', id], { env: keyed });
    expect(none.code).toBe(2);
    const dropped = await runCli(['relay', 'drop', w.relay.url, '--webhook', id, '--all-refused', '--json'], { env: keyed });
    expect(JSON.parse(dropped.stdout)).toMatchObject({ dropped: refused.map((r) => r.seq), not_refused: [] });
    expect(await relayed(url)).toMatchObject({ queued: 0, refused: 0 });
    for (const r of [listed, asDeliveries, dropped, table]) expect(r.stdout + r.stderr).not.toContain(secret);
  }, 120_000);

  it("a secret replaced here (secret set) while deliveries wait: the next listen gives the relay the new one, and what came before reaches the app (the old one's grace period)", async () => {
    const { id, secret, url } = await channelled();
    for (let i = 0; i < 3; i++) expect((await send(url, 'POST', delivery(secret, `trg_before_rotation_${i}`).headers, delivery(secret, `trg_before_rotation_${i}`).body)).status).toBe(200);
    const next = generateSecret();
    expect((await runCli(['secret', 'set', id], { env: w.env, stdin: `${next}\n` })).code).toBe(0);
    w.got.length = 0;
    const l = listen(w, ['--webhook', id]);
    try {
      await until(() => w.got.length === 3, 'the three signed with the replaced secret');
      expect(w.got).toEqual([0, 1, 2].map((i) => `trg_before_rotation_${i}`));
      await until(async () => (await relayed(url))?.queued === 0, 'the relay to be empty');
      expect(await relayed(url)).toMatchObject({ refused: 0 });
      // from now on the relay takes the new secret only
      expect((await send(url, 'POST', delivery(secret, 'trg_old_secret').headers, delivery(secret, 'trg_old_secret').body)).status).toBe(401);
      expect((await send(url, 'POST', delivery(next, 'trg_new_secret').headers, delivery(next, 'trg_new_secret').body)).status).toBe(200);
      await until(() => w.got.includes('trg_new_secret'), 'the new one');
    } finally {
      expect(await l.stop('SIGINT')).toBe(130);
    }
  }, 120_000);

  it('a secret re-stored while listen runs, with no relay token (its keys only): the relay is given it at once, proved by the one before', async () => {
    const { id, secret, url } = await channelled();
    const keyed = { ...w.env, WXHOOKS_RELAY_TOKEN: '' };
    const l = startCli(['listen', '--relay', w.relay.url, '--json', '--forward-to', `${w.app.url}/hooks`, '--webhook', id], keyed);
    try {
      await l.waitFor<{ event?: string }>((v) => v.event === 'listening');
      const next = generateSecret();
      expect((await runCli(['secret', 'set', id], { env: keyed, stdin: `${next}\n` })).code).toBe(0);
      await l.waitFor<{ event?: string }>((v) => v.event === 'secret_changed');
      await l.waitFor<{ event?: string }>((v) => v.event === 'relay_back');
      w.got.length = 0;
      expect((await send(url, 'POST', delivery(next, 'trg_restored_secret').headers, delivery(next, 'trg_restored_secret').body)).status).toBe(200);
      await until(() => w.got.includes('trg_restored_secret'), 'a delivery signed with the re-stored secret');
      expect((await send(url, 'POST', delivery(secret, 'trg_before_secret').headers, delivery(secret, 'trg_before_secret').body)).status).toBe(401);
      expect(l.lines.join('\n') + l.stderr()).not.toContain(next);
    } finally {
      expect(await l.stop('SIGINT')).toBe(130);
    }
  }, 120_000);

  it('a second listen on a channel is refused (exit 5, saying so), and the first keeps taking its deliveries', async () => {
    const { id, secret, url } = await channelled();
    const first = listen(w, ['--webhook', id]);
    try {
      await first.waitFor<{ event?: string }>((v) => v.event === 'listening');
      // another machine (its own store folder: on one machine the processed-pairs file already refuses a second listen), with the webhook's secret and no relay token
      const elsewhere = { ...w.env, WXHOOKS_CONFIG_DIR: tempDir(), WXHOOKS_RELAY_TOKEN: '' };
      expect((await runCli(['secret', 'set', id], { env: elsewhere, stdin: `${secret}\n` })).code).toBe(0);
      const second = await runCli(['listen', '--relay', w.relay.url, '--webhook', id, '--json'], { env: elsewhere, spawn: true });
      expect(second.code, second.stderr).toBe(5);
      expect(second.stderr).toContain('Another listen holds the channel');
      w.got.length = 0;
      expect((await send(url, 'POST', delivery(secret, 'trg_to_first').headers, delivery(secret, 'trg_to_first').body)).status).toBe(200);
      await until(() => w.got.includes('trg_to_first'), 'the delivery, at the first listen');
    } finally {
      expect(await first.stop('SIGINT')).toBe(130);
    }
  }, 120_000);

  it('a relay that cannot be reached at start: a line at every try (--json too), never exit 0; Ctrl-C exits 130', async () => {
    const id = await createWebhook(w, 'http://127.0.0.1:9/placeholder');
    const away = `http://127.0.0.1:${await freePort()}`;
    const l = startCli(['listen', '--relay', away, '--webhook', id, '--json'], w.env);
    const tries = [await l.waitFor<{ event?: string; attempt: number }>((v) => v.event === 'relay_unreachable' && v.attempt === 1)];
    tries.push(await l.waitFor<{ event?: string; attempt: number }>((v) => v.event === 'relay_unreachable' && v.attempt === 2));
    expect(tries.map((t) => t.attempt)).toEqual([1, 2]);
    expect(l.child.exitCode).toBeNull();
    expect(await l.stop('SIGINT')).toBe(130);
  }, 60_000);

  it('the one-command loop with a relay away: it keeps trying, and at Ctrl-C deletes its temporary webhook and lets go of its files', async () => {
    const away = `http://127.0.0.1:${await freePort()}`;
    const run = () => startCli(['listen', '--relay', away, '--json'], w.env);
    const l = run();
    const created = await l.waitFor<{ event?: string; webhook_id: string }>((v) => v.event === 'webhook_created');
    await l.waitFor<{ event?: string; attempt: number }>((v) => v.event === 'relay_unreachable' && v.attempt === 2);
    expect(await l.stop('SIGINT')).toBe(130);
    expect(l.lines.some((line) => (JSON.parse(line) as { event?: string }).event === 'webhook_deleted')).toBe(true);
    const gone = await runCli(['webhook', 'get', created.webhook_id], { env: w.env });
    expect(gone.code).toBe(4);
    // the next one starts clean: nothing left locked
    const again = run();
    await again.waitFor<{ event?: string }>((v) => v.event === 'relay_unreachable');
    expect(await again.stop('SIGINT')).toBe(130);
    expect(again.stderr()).not.toContain('left locked');
    expect(l.stderr() + again.stderr()).not.toContain(TOKEN);
  }, 60_000);
});
