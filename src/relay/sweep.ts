import * as DEFAULTS from '../delivery/defaults.js';
import type { RelayState } from './state.js';

/**
 * What the relay lets go of with time: deliveries older than it keeps (not the refused ones: those wait
 * for a person), channels unused for as long (their connection gone, nothing refused in them) with their
 * secret and what they hold, and secrets replaced longer ago than the grace period. It also writes, now
 * and then, when each channel was last used: a connection changes that in memory only.
 */
export async function sweep(state: RelayState): Promise<void> {
  const now = state.now();
  const { keepMs } = state.settings;
  const expired = await state.storage.expire(now - keepMs);
  state.freed(expired);
  const per = new Map<string, number>();
  for (const r of expired) per.set(r.channel, (per.get(r.channel) ?? 0) + 1);
  for (const [channel, deliveries] of per) state.emit({ event: 'expired', channel, deliveries });
  const usage = await state.storage.usage();
  for (const ch of [...state.channels.values()]) {
    const name = ch.record.name;
    if (state.connected(name)) continue;
    const u = usage.get(name);
    if (now - ch.record.lastSeenAt > keepMs && !u?.refused) {
      state.channels.delete(name);
      const removed = await state.storage.deleteChannel(name);
      state.freed(removed);
      state.emit({ event: 'channel_forgotten', channel: name, deliveries: removed.length });
      continue;
    }
    const retired = ch.record.retired?.filter((r) => now - r.at < DEFAULTS.relaySecretGraceMs);
    const stale = retired !== undefined && retired.length !== ch.record.retired!.length;
    // written when it lags by a hundredth of --keep: a channel is forgotten at most that much early after a restart
    if (stale || ch.record.lastSeenAt - ch.seenWritten >= keepMs / 100) {
      const record = { ...ch.record, ...(stale ? { retired } : {}) };
      // a write that fails (a full disk) is tried again at the next sweep: nothing depends on it meanwhile
      const written = await state.storage.saveChannel(record).then(
        () => true,
        () => false,
      );
      if (written) {
        ch.record = record;
        ch.seenWritten = record.lastSeenAt;
      }
    }
  }
}
