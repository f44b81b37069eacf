import { ANSWERS, type Answer } from './answers.js';

/**
 * The shape every door has (listen's server, the Node middleware, the web handler): it reads a request,
 * asks the core, and writes the answer the core gives. In order:
 *
 *   1. `routed`: another path is 404 (or the app's own route), another method 405;
 *   2. a door that keeps nothing of a refused request refuses one on its headers alone (a header missing,
 *      a stale timestamp) before reading its body (`WebhooksCore.refuseEarly`);
 *   3. the body, read within the body limit and the in-flight budget (src/util/bodies.ts, neutral too): 413, 503, 408;
 *   4. verified: a failure is answered `ANSWERS.notVerified`;
 *   5. the pair claimed, the delivery handled and the pair completed or released (src/delivery/runner.ts);
 *   6. the answer written as the table has it: its status, its JSON body, its headers.
 */

/** A request's path, without its query. */
export function pathOf(url: string): string {
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}

/** What a request is answered at once for where it was sent: another path (when the door has one), another method. */
export function routed(method: string | undefined, path: string, expected: string | undefined, notFoundHint?: string): Answer | undefined {
  if (expected !== undefined && path !== expected) return ANSWERS.notFound(notFoundHint);
  if (method !== 'POST') return ANSWERS.methodNotAllowed;
  return undefined;
}
