import { Agent } from 'node:http';
import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { deliverSigned } from '../helpers/deliver.js';
import { startCli } from '../helpers/process.js';
import { nodeFileRelay, workerdRelay, type RelayUnderTest } from '../helpers/relay.js';
import { createWebhook, relayStatus, TOKEN, until, type World, worldFor } from '../helpers/relay-listen.js';

// `listen --relay` killed while draining: the emulator (the service) → a relay (the Node host in this
// process, or the Worker in workerd) → `listen --relay` (the built binary: kill -9 is the point) → an app
// (a server in this test), counted at the app by trigger id. (End to end in this process, and doctor
// --relay: test/relay-listen.e2e.test.ts; its flags and refusals: test/relay-cli.test.ts.)

const listen = (w: World, args: string[]) => startCli(['listen', '--relay', w.relay.url, '--json', '--forward-to', `${w.app.url}/hooks`, ...args], w.env);

/**
 * SIGKILL while draining 1,000 queued deliveries (a quarter of them through), then a restart: none is
 * lost, and at the app each comes once, but for at most the one being forwarded at the kill (forwarded,
 * its pair not yet stored: the rule of every door, test/full/durability.e2e.test.ts: what was
 * acknowledged is never forwarded twice). 1,000 leaves hundreds queued on either side of the kill, as
 * 2,000 did in twice the time.
 */
function drainTest(name: string, makeRelay: () => Promise<RelayUnderTest>) {
  describe(`listen --relay killed while draining (${name})`, () => {
    let w: World;
    worldFor(makeRelay, (made) => (w = made));

    it('1,000 queued, SIGKILL mid-drain, restart: every one reaches the app, none twice (but the one in hand at the kill)', async () => {
      const id = await createWebhook(w, 'http://127.0.0.1:9/placeholder');
      const first = listen(w, ['--webhook', id]);
      const ready = await first.waitFor<{ event?: string; url: string }>((v) => v.event === 'listening');
      expect(await first.stop('SIGINT')).toBe(130);
      const secret = (await runCli(['secret', 'show', id], { env: w.env })).stdout.trim();
      const N = 1000;
      const triggers = Array.from({ length: N }, (_, i) => `trg_drain_${process.pid}_${i}`);
      const agent = new Agent({ keepAlive: true, maxSockets: 8 });
      let next = 0;
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          while (next < N) expect(await deliverSigned(ready.url, agent, secret, triggers[next++]!)).toBe(200);
        }),
      );
      agent.destroy();
      w.got.length = 0;
      const draining = listen(w, ['--webhook', id]);
      await until(() => w.got.length >= N / 4, 'a quarter of the backlog');
      draining.child.kill('SIGKILL');
      await draining.exited;
      const atKill = w.got.length;
      expect(atKill).toBeLessThan(N);
      const again = listen(w, ['--webhook', id]);
      try {
        await until(() => new Set(w.got).size === N, 'every delivery', 120_000);
        await until(async () => (await relayStatus(w)).channels.find((c) => ready.url.endsWith(c.channel))?.queued === 0, 'the relay to be empty');
      } finally {
        await again.stop('SIGINT');
      }
      const counts = new Map<string, number>();
      for (const t of w.got) counts.set(t, (counts.get(t) ?? 0) + 1);
      const twice = [...counts.values()].filter((n) => n > 1).length;
      expect(triggers.filter((t) => !counts.has(t))).toEqual([]);
      expect(twice).toBeLessThanOrEqual(1);
    }, 240_000);
  });
}

drainTest('the Node relay', () => nodeFileRelay({ token: TOKEN, maxBytes: 256 * 1024 * 1024 }));
drainTest('the Worker in workerd', () => workerdRelay({ token: TOKEN, maxBytes: 256 * 1024 * 1024 }));
