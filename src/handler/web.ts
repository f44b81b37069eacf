import { MAX_BODY, errorBody } from '../receiver/common.js';
import { utf8 } from '../signing/encoding.js';
import { WebVerifier } from '../signing/verify-web.js';
import { WebhooksCore, secretsFrom, type WebhooksOptions } from './core.js';

/**
 * `wxhooks/web`: the handler library for any runtime with Web Crypto and the Fetch API (Cloudflare
 * Workers, Deno, Bun, Node 20, Hono on any of them). No Node module, no Node Buffer: it is built into one
 * file (dist/web.js) by scripts/bundle.js. The rules are those of the Node entry and `listen`.
 */

export { MemoryStore, WebhookHandlerError, type HandlerStore, type MemoryStoreOptions, type Receipt, type RawBody, type WebhooksOptions } from './core.js';
export type * from './types.js';
export { WebVerifier, type WebVerifierOptions } from '../signing/verify-web.js';
export type { VerifyResult, VerifySuccess, VerifyFailure, VerifyFailureReason, HeaderSource } from '../signing/rules.js';

type Digestible = Parameters<typeof crypto.subtle.digest>[1];

export class Webhooks extends WebhooksCore {
  constructor(options: WebhooksOptions) {
    const verifier = new WebVerifier({ secret: secretsFrom(options), scheme: options.scheme, tolerance: options.tolerance });
    super(
      {
        verify: (headers, body, now) => verifier.verify(headers, body, now),
        sha256: async (prefix, body) => {
          const p = utf8(prefix);
          const all = new Uint8Array(p.length + body.length);
          all.set(p);
          all.set(body, p.length);
          return new Uint8Array(await crypto.subtle.digest('SHA-256', all as Digestible));
        },
      },
      options,
    );
  }
}

export interface WebHandlerOptions {
  /** Answer only this path (default: every path); others are answered 404. */
  path?: string;
  /** Bodies larger than this are answered 413 (default 25 MiB, as `listen --max-body`). */
  maxBody?: number;
}

const json = (status: number, body: string, headers: Record<string, string> = {}) => new Response(body, { status, headers: { 'content-type': 'application/json', ...headers } });

/** The body's bytes, read as they come and no further than `max`: undefined when it is larger. */
async function readAtMost(request: Request, max: number): Promise<Uint8Array | undefined> {
  const declared = Number(request.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > max) return undefined;
  if (!request.body) return new Uint8Array(0);
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    size += value.length;
    if (size > max) {
      await reader.cancel();
      return undefined;
    }
    chunks.push(value);
  }
  if (chunks.length === 1) return chunks[0]!;
  const body = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    body.set(c, at);
    at += c.length;
  }
  return body;
}

/**
 * A fetch handler, `(request: Request) => Promise<Response>`: `export default { fetch: handler }` in a
 * Worker or Bun, `Deno.serve(handler)`, `app.post('/webhooks', (c) => handler(c.req.raw))` in Hono.
 */
export function createWebHandler(webhooks: WebhooksCore, options: WebHandlerOptions = {}): (request: Request) => Promise<Response> {
  const maxBody = options.maxBody ?? MAX_BODY;
  return async (request) => {
    if (options.path !== undefined && new URL(request.url).pathname !== options.path) return json(404, errorBody('not found'));
    if (request.method !== 'POST') return json(405, errorBody('deliveries are POSTed'), { allow: 'POST' });
    const body = await readAtMost(request, maxBody);
    if (!body) return json(413, errorBody(`the body is over ${maxBody} bytes`));
    const receipt = await webhooks.verifyAndReceive({ headers: request.headers, body });
    return json(receipt.status, receipt.body);
  };
}
