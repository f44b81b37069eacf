import type { IncomingHttpHeaders } from 'node:http';
import * as DEFAULTS from '../delivery/defaults.js';
import { door, type DoorIO } from '../delivery/door.js';
import { outcomeLabel } from '../delivery/outcomes.js';
import { RelayClient, type RelayClientEvent, type RelayedDelivery, type RelayReady, type RetiredSecret, type Verdict } from '../relay/client.js';
import { MAX_WINDOW } from '../relay/protocol.js';
import type { Scheme } from '../signing/layouts.js';
import { Verifier } from '../signing/verify.js';
import { systemClock, type Clock } from '../util/clock.js';
import { InflightBudget } from '../util/bodies.js';
import { nodeBody } from '../util/read-body.js';
import type { ReceiverEvent } from './event.js';
import { makeReceive, type RawDelivery, type Received, type ReceiveOptions } from './receive.js';
import type { RunningReceiver } from './server.js';

/**
 * listen's second door: a relay (src/relay/) instead of a port of its own. Each delivery the relay hands
 * over is received exactly as one that came over HTTP (src/receiver/receive.ts: verified again, claimed,
 * saved, forwarded, its pair stored, reported), and acknowledged to the relay only when the answer would
 * have been a 2xx (its pair stored, or a duplicate). One that does not verify here is refused to the
 * relay, which keeps it apart with the reason (listed by `relay refused`, dropped only by `relay drop`):
 * never acknowledged, so never lost. Anything else (a store or a forward that failed) is not
 * acknowledged: the relay hands it over again.
 *
 * The relay verifies at its edge as this listen does (its secrets, its tolerance and layout, given in
 * the channel's `open`), so a refusal here means something changed between the two (a secret replaced
 * here, a narrower --tolerance than the listen before): a secret the relay had for the channel until
 * lately still verifies, here, what it received before the change (DEFAULTS.relaySecretGraceMs).
 */

/** What the relay door takes: listen's receiving (the same options as its HTTP door's), and the relay's link. */
export interface RelayDoorOptions extends Omit<ReceiveOptions, 'monotonic'> {
  relay: string;
  /** The relay token: without it, the channel's keys (from the secrets) reach the channel, which must exist. */
  token?: string;
  channel: string;
  /** Every secret listen verifies with, given to the relay (it verifies at the edge with them). */
  secrets: string[];
  /** listen's --tolerance and --scheme, given to the relay too. */
  tolerance: number;
  scheme: Scheme;
  temporary: boolean;
  maxInflight?: number;
  /**
   * How many deliveries are handled at once. Default: 1 with --forward-to (the app is given them in the
   * order the relay received them), else DEFAULTS.relayConcurrency (nothing is sent on, so nothing depends
   * on their order but the report lines, which a direct listen under load has out of order too).
   */
  concurrency?: number;
  clock?: Clock;
  onEvent: (event: ReceiverEvent, raw?: RawDelivery) => void;
  /** What happens to the link: connected, lost, unreachable (every try), back. */
  onLink: (event: RelayClientEvent) => void;
}

export interface RunningRelayDoor extends RunningReceiver {
  /** Resolves once the channel is open (the client keeps trying until then); rejects when the relay refuses this listen for good. */
  ready: Promise<RelayReady>;
  /** Rejects when the relay refuses this listen for good after it started (another one took the channel). */
  failed: Promise<never>;
  /** listen verifies with these secrets from now on (the stored one changed): the relay is told too. */
  rekey(secrets: string[]): void;
  /** Where a delivery refused here was kept (for the messages): the channel. */
  channel: string;
}

/** What becomes of a delivery at the relay: acknowledged (its pair stored, or a duplicate), refused (it does not verify here: kept apart), or handed over again. */
export function verdictOf(r: Pick<Received, 'verified' | 'answer' | 'event'>): Verdict {
  if (!r.verified) return { refused: { reason: r.event.reason ?? r.answer.outcome, message: r.event.message ?? r.answer.outcome } };
  return r.answer.status >= 200 && r.answer.status < 300;
}

/** The relay's headers as Node gives a request's: lower-cased, a repeated one joined. */
function nodeHeaders(headers: [string, string][]): IncomingHttpHeaders {
  const out: Record<string, string> = {};
  for (const [k, v] of headers) {
    const name = k.toLowerCase();
    out[name] = out[name] === undefined ? v : `${out[name]}, ${v}`;
  }
  return out;
}

/**
 * listen's verifier, and, for what the relay received before one of the channel's secrets was replaced,
 * the same secrets with that one too: the relay verified those with it, as it then stood.
 */
class RelayVerifier extends Verifier {
  private current: string[];
  private retired: RetiredSecret[] = [];
  private readonly earlier = new Map<string, Verifier>();

  constructor(
    private readonly main: Verifier,
    secrets: string[],
    private readonly settings: { scheme: Scheme; tolerance: number },
  ) {
    super({ secret: secrets, ...settings });
    this.current = secrets;
  }

  /** What the relay said of the channel's secrets replaced lately. */
  setRetired(current: string[], retired: RetiredSecret[]): void {
    this.current = current;
    this.retired = retired;
    this.earlier.clear();
  }

  override verify(...args: Parameters<Verifier['verify']>): ReturnType<Verifier['verify']> {
    const result = this.main.verify(...args);
    const [headers, body, receivedAt = Date.now()] = args;
    const older = this.retired.filter((r) => receivedAt < r.before).map((r) => r.secret);
    if (result.ok || !older.length) return result;
    const key = older.join('\n');
    let v = this.earlier.get(key);
    if (!v) this.earlier.set(key, (v = new Verifier({ secret: [...this.current, ...older], ...this.settings, diagnosePerMinute: 0, pin: false })));
    const again = v.verify(headers, body, receivedAt);
    return again.ok ? again : result;
  }
}

/** A delivery the relay handed over, as listen's door reads it: a request whose body is whole already, and where its verdict goes. */
interface Handed {
  d: RelayedDelivery;
  body: Buffer;
  headers: IncomingHttpHeaders;
  verdict: (v: Verdict) => void;
}

export async function startRelayDoor(o: RelayDoorOptions): Promise<RunningRelayDoor> {
  const clock = o.clock ?? systemClock;
  const maxInflight = o.maxInflight ?? DEFAULTS.maxInflightBytes;
  const copies = o.saveDir ? 2 : 1;
  // the relay sends no more than the window; --max-inflight bounds it again here (one always goes)
  const budget = new InflightBudget(maxInflight, true);
  let secrets = o.secrets;
  const verifier = new RelayVerifier(o.verifier, secrets, { scheme: o.scheme, tolerance: o.tolerance });
  const { receive, close: closeReceive } = await makeReceive({ ...o, verifier, monotonic: () => clock.monotonic() });
  let working = 0;
  let idle: (() => void) | undefined;
  let path = '/';

  // The core's door (src/delivery/door.ts), for a request that came whole over the relay's connection: its
  // body given as one chunk (charged to the budget), and its answer, once written, told to the relay as a verdict.
  const io: DoorIO<Handed, undefined, Buffer> = {
    method: () => 'POST',
    path: () => path,
    headers: (h) => h.headers,
    length: (h) => String(h.body.length),
    stream(h, _res, sink) {
      if (sink.chunk(h.body)) sink.end();
      return undefined;
    },
    alloc: nodeBody.alloc,
    // nothing to write: the relay is told in `ended` (acknowledged, refused, or handed over again)
    write: () => true,
  };
  const handle = door(io, {
    // the relay's own limit bounds a body; past the budget, the relay hands it over again later
    maxBody: Number.POSITIVE_INFINITY,
    budget,
    copies,
    deliver(h, body) {
      working++;
      return receive({ method: 'POST', path, url: path, headers: h.headers, body, now: h.d.receivedAt, began: clock.monotonic(), peer: 'relay' });
    },
    answerOf: (r) => r.answer,
    ended(h, end) {
      if (end.step !== 'delivered') {
        if (end.step === 'failed') done();
        return h.verdict(false);
      }
      const r = end.delivered;
      const verdict = verdictOf(r);
      if (verdict !== true && verdict !== false) {
        const { d } = h;
        r.event.relay_kept = { channel: o.channel, seq: d.seq };
        r.event.message = `${r.event.message ?? outcomeLabel(r.event.outcome)} Kept at the relay as refused delivery #${d.seq} of channel ${o.channel}, out of the queue, until dropped.`;
        r.event.hint = `It verified at the relay when it came, so something changed since (a secret replaced here, a narrower --tolerance). List what the relay keeps refused with \`wxhooks relay refused ${o.relay} --channel ${o.channel}\`, drop it with \`wxhooks relay drop ${o.relay} --channel ${o.channel} --seq ${d.seq}\`.`;
      }
      o.onEvent(r.event, r.raw);
      done();
      h.verdict(verdict);
    },
  });
  /** A delivery handled (or failed): close() waits for the last. */
  const done = () => {
    if (--working === 0) idle?.();
  };

  const onDelivery = (d: RelayedDelivery): Promise<Verdict> =>
    new Promise((verdict) => handle({ d, body: Buffer.from(d.body.buffer, d.body.byteOffset, d.body.byteLength), headers: nodeHeaders(d.headers), verdict }, undefined));

  const client = new RelayClient({
    url: o.relay,
    token: o.token,
    channel: o.channel,
    secrets,
    tolerance: o.tolerance,
    scheme: o.scheme,
    temporary: o.temporary,
    window: MAX_WINDOW,
    windowBytes: Math.max(1, Math.floor(maxInflight / copies)),
    concurrency: o.concurrency ?? (o.forwardTo ? 1 : DEFAULTS.relayConcurrency),
    clock,
    onDelivery,
    onEvent: o.onLink,
    onOpen: (r) => verifier.setRetired(secrets, r.retired),
  });
  path = new URL(client.inboundUrl).pathname;
  const ready = client.start();
  ready.catch(() => undefined);
  const failed = client.done.then(() => new Promise<never>(() => undefined));
  failed.catch(() => undefined);
  return {
    url: client.inboundUrl,
    port: 0,
    ready,
    failed,
    channel: o.channel,
    get refusedOverBudget() {
      return budget.refused;
    },
    inflight: budget,
    rekey(next: string[]) {
      // until the relay has them (and says what it replaced), the secrets of a moment ago still verify
      const before = secrets;
      secrets = next;
      verifier.setRetired(
        next,
        before.filter((s) => !next.includes(s)).map((secret) => ({ secret, before: Number.POSITIVE_INFINITY })),
      );
      client.setSecrets(next);
    },
    async close() {
      // those being handled finish, their pairs stored and acknowledged; a temporary channel goes with its webhook
      await client.close({ deleteChannel: o.temporary });
      if (working) await new Promise<void>((resolve) => (idle = resolve));
      await closeReceive();
    },
  };
}
