import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EmulatorClient } from '../api/emulator-client.js';
import type { Webhook } from '../api/normalize.js';
import type { Service } from '../api/service.js';
import type { Context } from '../context.js';
import { WxError } from '../errors.js';
import { checkChain, EventLog } from '../receiver/check.js';
import { startReceiver } from '../receiver/server.js';
import { Verifier } from '../signing/verify.js';
import { FilePairStore } from '../store/file-pairs.js';
import { configDir } from '../store/paths.js';
import { listenOnPort, type RunningListen } from '../store/running.js';
import { BindError, isLoopback } from '../util/net.js';
import { printable } from '../util/printable.js';
import { secretStoreFor } from './secrets.js';
import { baseUrlFor, describeScheme, serviceFor } from './service.js';
import * as DEFAULTS from '../delivery/defaults.js';

/** One line of `doctor`'s report: what was checked, whether it held, and what to do about it. */
export interface Check {
  name: string;
  ok: boolean;
  detail: string;
  /** What to do about it. */
  hint?: string;
  /** Said, but not a failure (an emulator's local URL). */
  note?: string;
}

export interface DiagnoseOptions {
  webhook?: string;
  publicUrl?: string;
  port?: number;
  relay?: string;
}

/** The ways an address can be one the live service cannot reach. */
export function unreachableReason(address: string): string | undefined {
  let host: string;
  try {
    host = new URL(address).hostname.replace(/^\[|\]$/g, '').toLowerCase();
  } catch {
    return 'it is not a URL';
  }
  if (isLoopback(host) || host === '0.0.0.0') return 'a loopback address';
  if (/^10\./.test(host) || /^192\.168\./.test(host) || /^172\.(1[6-9]|2\d|3[01])\./.test(host) || /^f[cd][0-9a-f]{2}:/.test(host)) return 'a private address';
  if (/^169\.254\./.test(host) || /^fe[89ab][0-9a-f]:/.test(host)) return 'a link-local address';
  return undefined;
}

async function isEmulator(service: Service): Promise<boolean> {
  try {
    await new EmulatorClient(service.http).ensureEmulator();
    return true;
  } catch {
    return false;
  }
}

/** The checks of the chain, link by link, without printing (`doctor`, and the MCP server's doctor tool); without --webhook, the webhooks too. */
export async function diagnose(ctx: Context, o: DiagnoseOptions): Promise<{ checks: Check[]; webhooks?: Webhook[] }> {
  const checks: Check[] = [];
  let webhooks: Webhook[] | undefined;
  const done = () => ({ checks, webhooks });

  // 1. credentials
  const { service, base, credentials } = await serviceFor(ctx);
  try {
    const status = await service.authStatus();
    checks.push(
      status.authed
        ? { name: 'credentials', ok: true, detail: `accepted by ${base.url} for client ${printable(String(status.client_id ?? '?'))}: ${describeScheme(credentials)}` }
        : { name: 'credentials', ok: false, detail: `${base.url} does not accept them (authed: false)`, hint: `Check ${credentials.keyFrom}; a key belongs to one service, so check --base-url too.` },
    );
  } catch (err) {
    checks.push({ name: 'credentials', ok: false, detail: messageOf(err), hint: (err as WxError).hint });
  }
  if (!checks[0]!.ok) return done();

  const relay = o.relay ?? ctx.env.WXHOOKS_RELAY_URL;
  /** The inbound URLs of the relay start so: a webhook delivering there is checked by the relay's checks, not by a receiver of doctor's. */
  let relayInbound: string | undefined;
  if (relay !== undefined) {
    // the relay's link, loaded only when a relay is checked
    const { relayChecks } = await import('../relay/doctor-checks.js');
    relayInbound = (await import('../relay/status-client.js')).inboundUrl(relay, 'x').slice(0, -1);
    const hook = o.webhook === undefined ? undefined : await service.getWebhook(o.webhook).catch(() => undefined);
    checks.push(...(await relayChecks(ctx, relay, o.webhook === undefined ? undefined : { id: o.webhook, url: hook?.url, base: base.url })));
  }

  if (o.webhook === undefined) {
    webhooks = await service.listAllWebhooks();
    return done();
  }

  // 2. the webhook
  let hook: Webhook;
  try {
    hook = await service.getWebhook(o.webhook);
  } catch (err) {
    checks.push({ name: 'webhook', ok: false, detail: messageOf(err), hint: (err as WxError).hint ?? 'List what exists with `wxhooks webhook list`.' });
    return done();
  }
  const problems = [hook.active === false && 'it is inactive', !hook.subscriptions.length && 'it has no subscriptions'].filter(Boolean);
  checks.push(
    problems.length
      ? {
          name: 'webhook',
          ok: false,
          detail: `webhook ${hook.id} exists, but ${problems.join(' and ')}`,
          hint: hook.active === false ? `wxhooks webhook update ${hook.id} --active` : `wxhooks subscription add ${hook.id} TYPE`,
        }
      : { name: 'webhook', ok: true, detail: `webhook ${hook.id} is active, with ${hook.subscriptions.map((s) => s.type).join(', ')}` },
  );

  // 3. its URL
  const reason = unreachableReason(hook.url);
  const emulator = reason !== undefined && (await isEmulator(service));
  const where = printable(hook.url);
  if (o.publicUrl !== undefined && hook.url.replace(/\/+$/, '') !== o.publicUrl.replace(/\/+$/, '') && !hook.url.startsWith(o.publicUrl.replace(/\/+$/, '') + '/')) {
    checks.push({ name: 'url', ok: false, detail: `the webhook points at ${where}, not at ${printable(o.publicUrl)}`, hint: `wxhooks webhook update ${hook.id} --url ${o.publicUrl}` });
  } else if (reason && emulator) {
    checks.push({ name: 'url', ok: true, detail: `${where} is ${reason}`, note: 'fine for the emulator, which runs here; the live service could not reach it' });
  } else if (reason) {
    checks.push({
      name: 'url',
      ok: false,
      detail: `${where} is ${reason}: the service cannot reach it`,
      hint: `Expose the receiver with a tunnel (ngrok http ${DEFAULTS.listenPort}), then \`wxhooks webhook update ID --url https://…\`, or use \`wxhooks listen --public-url\`.`,
    });
  } else if (!hook.url.startsWith('https:')) {
    checks.push({ name: 'url', ok: false, detail: `${where} is not https`, hint: 'The live service delivers to https URLs; a tunnel gives one.' });
  } else {
    checks.push({ name: 'url', ok: true, detail: `${where} is a public https URL` });
  }

  // 4. its secret
  const stored = await (await secretStoreFor(ctx)).get((await baseUrlFor(ctx)).url, hook.id);
  checks.push(
    stored
      ? { name: 'secret', ok: true, detail: `the secret of webhook ${hook.id} is stored` }
      : { name: 'secret', ok: false, detail: `no secret is stored for webhook ${hook.id}`, hint: `wxhooks secret set ${hook.id}, then paste it (it was shown once, when the webhook was created)` },
  );

  // 5. the chain, with a receiver of our own where the URL leads
  if (relayInbound !== undefined && hook.url.startsWith(relayInbound)) return done(); // pings go to the relay, and on to a listen --relay
  if (stored && hook.subscriptions.length) checks.push(...(await deliveryChecks(ctx, service, hook, stored.secret, o)));
  return done();
}

/** Starts a receiver where the webhook's URL leads, pings each subscription, and says what arrived. */
async function deliveryChecks(ctx: Context, service: Service, hook: Webhook, secret: string, o: DiagnoseOptions): Promise<Check[]> {
  const target = new URL(hook.url);
  const local = unreachableReason(hook.url) === 'a loopback address';
  const listenPort = o.port ?? (local && target.port ? Number(target.port) : DEFAULTS.listenPort);
  const log = new EventLog();
  const dir = mkdtempSync(join(tmpdir(), 'wxhooks-doctor-')); // the pings' pairs are kept apart from listen's
  const store = await FilePairStore.open({ dir, ttlMs: 3_600_000 });
  try {
    const receiver = await startReceiver({
      port: listenPort,
      host: '127.0.0.1',
      path: target.pathname || '/',
      verifier: new Verifier({ secret, diagnosePerMinute: Infinity }), // the service's pings only: each failure says why
      store,
      onEvent: (event) => log.push(event),
    });
    try {
      const results = await checkChain(service, hook, log, ctx.global.timeoutMs, { port: receiver.port, path: target.pathname || '/' });
      return results.map((r) => ({ name: `delivery: ${r.type}`, ok: r.result === 'verified', detail: r.detail, hint: r.hint }));
    } finally {
      await receiver.close();
    }
  } catch (err) {
    if (err instanceof BindError && err.reason === 'in_use') {
      const running = await listenOnPort(configDir(ctx.env), listenPort);
      if (running) return throughListen(service, hook, running);
    }
    if (err instanceof BindError) {
      return [
        {
          name: 'delivery',
          ok: false,
          detail: `no receiver could be started on port ${listenPort}: ${messageOf(err)}`,
          hint: 'Is `wxhooks listen` running there? Stop it, or check with `wxhooks listen --webhook ID --check` instead.',
        },
      ];
    }
    throw err;
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The port is held by a running `wxhooks listen`: the chain is checked through it. It answers 2xx only to
 * a delivery that verified (and was stored, and taken by the app it forwards to), so a ping the service
 * reports delivered has gone the whole way.
 */
async function throughListen(service: Service, hook: Webhook, running: RunningListen): Promise<Check[]> {
  const via = `the running \`wxhooks listen\` (pid ${running.pid}) on port ${running.port}`;
  const note = running.webhook_id !== null && running.webhook_id !== hook.id ? `that listen verifies with the secret of webhook ${running.webhook_id}, not ${hook.id}` : undefined;
  const out: Check[] = [];
  for (const sub of hook.subscriptions) {
    try {
      await service.ping(hook.id, sub.id);
      out.push({ name: `delivery: ${sub.type}`, ok: true, detail: `a test delivery reached ${via}, which verified it and answered 2xx`, ...(note ? { note } : {}) });
    } catch (err) {
      if (!(err instanceof WxError)) throw err;
      out.push({
        name: `delivery: ${sub.type}`,
        ok: false,
        detail: `through ${via}: ${err.serviceMessage ?? err.message}`,
        hint: note ? `Restart that listen with --webhook ${hook.id}.` : `See why on that listen's terminal; a 401 there means it verifies with another secret (restart it with --webhook ${hook.id}).`,
      });
    }
  }
  return out;
}

const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));
