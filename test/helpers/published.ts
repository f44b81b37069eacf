import { startEmulator, type RunningEmulator } from '../../src/emulator/server.js';
import { expect } from 'vitest';
import type { DeliveryAttempt } from '../../src/emulator/state.js';

/** An emulator in this process that says when each notification's deliveries are over: delivered, or failed for good. */
export interface PublishingEmulator {
  emu: RunningEmulator;
  /** Resolves with the attempt that ended the notification of `trigger` (delivered, or its last retry failed). */
  settled(trigger: string): Promise<DeliveryAttempt>;
  /** Publishes an event (POST /emulator/v1/events); resolves with its trigger once its deliveries are over. */
  publish(event: Record<string, unknown>): Promise<{ trigger: string; attempt: DeliveryAttempt }>;
}

export async function publishingEmulator(retryDelays: number[]): Promise<PublishingEmulator> {
  const attempts: DeliveryAttempt[] = [];
  const wakers = new Set<() => void>();
  const emu = await startEmulator({
    port: 0,
    retryDelays,
    onAttempt: (a) => {
      attempts.push(a);
      for (const wake of wakers) wake();
    },
  });
  const settled = (trigger: string) =>
    new Promise<DeliveryAttempt>((resolve) => {
      const look = () => {
        const done = attempts.find((a) => a.trigger_id === trigger && (a.outcome === 'delivered' || a.next_attempt_at === undefined));
        if (!done) return;
        wakers.delete(look);
        resolve(done);
      };
      wakers.add(look);
      look();
    });
  return {
    emu,
    settled,
    async publish(event) {
      const res = await fetch(`${emu.url}/emulator/v1/events`, {
        method: 'POST',
        headers: { authorization: `Bearer ${emu.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify(event),
      });
      const trigger = ((await res.json()) as { trigger_id: string }).trigger_id;
      return { trigger, attempt: await settled(trigger) };
    },
  };
}

/** Publishes an event on the emulator that `env` points the CLI at (POST /emulator/v1/events): taken (202), its deliveries on their way. */
export async function publishEvent(env: Record<string, string>, body: Record<string, unknown>): Promise<void> {
  const res = await fetch(`${env.WX_BASE_URL}/emulator/v1/events`, {
    method: 'POST',
    headers: { authorization: `Bearer ${env.WX_API_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  expect(res.status).toBe(202);
}
