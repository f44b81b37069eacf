import type { Processed } from '../delivery/steps.js';
import { openSinkAt } from '../sinks/index.js';
import type { SinkDelivery } from '../sinks/message.js';
import { SinkRefusedError, type Sink } from '../sinks/sink.js';
import type { SinkTarget } from '../sinks/sink.js';

/**
 * `listen --sink`: the part of listen's handling step that publishes a verified delivery to every sink.
 * The delivery is processed only when every broker acknowledged it (or had its pair already): one that
 * is away, or did not answer in time, makes it not processed (503 with Retry-After, the claim let go, so
 * the service's retry is published once the broker is back); one that refused it for good makes it
 * not processed too, answered 502 (a retry is refused the same way until the broker is changed).
 */

/** What publishing did: where each sink put it, or why a sink did not take it. */
export interface Published {
  published: { sink: string; id: string; duplicate: boolean }[];
  sinkError?: NonNullable<Processed['sinkError']>;
}

/** What a broker's failure says, and what to do about it when it says (listen's line, never the sender's answer). */
const messageOf = (e: unknown) => (e instanceof Error ? `${e.message}${(e as { hint?: string }).hint ? ` ${(e as { hint?: string }).hint}` : ''}` : String(e));

/** Publishes to every sink at once; resolves when each has answered. Never rejects. */
export async function publishToSinks(sinks: readonly Sink[], delivery: SinkDelivery): Promise<Published> {
  const results = await Promise.allSettled(sinks.map((s) => s.publish(delivery)));
  const out: Published = { published: [] };
  const failures: { refused: boolean; why: string }[] = [];
  results.forEach((r, i) => {
    if (r.status === 'fulfilled') out.published.push({ sink: sinks[i]!.where, id: r.value.id, duplicate: r.value.duplicate });
    else failures.push({ refused: r.reason instanceof SinkRefusedError, why: `${sinks[i]!.where}: ${messageOf(r.reason)}` });
  });
  if (failures.length) {
    // refused for good wins: retrying while another broker is away would be refused again anyway
    const refused = failures.filter((f) => f.refused);
    const shown = refused.length ? refused : failures;
    out.sinkError = { refused: refused.length > 0, why: shown.map((f) => f.why).join('; ') };
  }
  return out;
}

/** What listen is told of its sinks while they are open: `sink` is the URL without its password. */
export interface SinkWatch {
  /** A broker found gone, or back. */
  connection(sink: string, state: 'lost' | 'restored', reason?: string): void;
  /** A broker found to have dropped what no worker had read, or to be set to. */
  drops(sink: string, what: string): void;
}

/**
 * Opens every sink (before listen takes a request): all, or none (those opened are closed again, and
 * the first failure thrown: exit 6 for a broker that cannot be reached, naming it without its password;
 * exit 2 for one set to drop what no worker has read, unless its URL accepts it).
 */
export async function openSinks(targets: readonly SinkTarget[], watch: SinkWatch): Promise<Sink[]> {
  const opened = await Promise.allSettled(
    targets.map((t) => openSinkAt(t, { onConnection: (state, reason) => watch.connection(t.shown, state, reason), onDrops: (what) => watch.drops(t.shown, what) })),
  );
  const failed = opened.find((r) => r.status === 'rejected');
  if (failed) {
    await closeSinks(opened.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : [])));
    throw failed.reason;
  }
  return opened.map((r) => (r as PromiseFulfilledResult<Sink>).value);
}

/** Closes the sinks (after the receiver's last delivery was answered); a close that fails is no one's concern by then. */
export async function closeSinks(sinks: readonly Sink[] | undefined): Promise<void> {
  await Promise.all((sinks ?? []).map((s) => s.close().catch(() => undefined)));
}
