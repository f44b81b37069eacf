import type { RelayState } from './state.js';

/**
 * What the relay lets go of with time: deliveries older than it keeps, and channels unused for as long
 * (their connection gone), with their secret and what they hold.
 */
export async function sweep(state: RelayState): Promise<void> {
  const now = state.now();
  const { keepMs } = state.settings;
  const expired = await state.storage.expire(now - keepMs);
  state.freed(expired);
  const per = new Map<string, number>();
  for (const r of expired) per.set(r.channel, (per.get(r.channel) ?? 0) + 1);
  for (const [channel, deliveries] of per) state.emit({ event: 'expired', channel, deliveries });
  for (const ch of [...state.channels.values()]) {
    const name = ch.record.name;
    if (now - ch.record.lastSeenAt <= keepMs || state.connected(name)) continue;
    state.channels.delete(name);
    const removed = await state.storage.deleteChannel(name);
    state.freed(removed);
    state.emit({ event: 'channel_forgotten', channel: name, deliveries: removed.length });
  }
}
