import { UsageError } from '../errors.js';
import { printable } from '../util/printable.js';
import { SUBSCRIPTION_TYPES, suggestion, urlProblem } from '../vocabulary.js';

/**
 * Where `listen --forward-to` sends a verified delivery: the URL of its type (`--forward-to TYPE=URL`,
 * repeatable), else the one URL given without a type, else nowhere (the delivery is processed and
 * acknowledged, and its report says it was not forwarded: DECISIONS.md). The receiver, the inspector's
 * replay, the ready line and the record of a running listen all ask `routeFor`, so none restates the rule.
 */
export interface ForwardRoutes {
  /** The URL of each type given a route. */
  byType: Record<string, string>;
  /** The URL of every other type (the one given without a type), when there is one. */
  other?: string;
}

/** How routes are shown (the `listening` event, the running listen's record, the inspector's about): `forward_to` is the URL of every other type. */
export interface ShownRoutes {
  forward_to: string | null;
  forward_routes: Record<string, string>;
}

const hint = `Give --forward-to TYPE=URL for a type (repeatable), and at most one URL without a type for every other type; the types: ${SUBSCRIPTION_TYPES.join(', ')}.`;

/**
 * The parser of one `--forward-to` value, in src/util/parse.ts's style, given the routes of the values
 * before it: `TYPE=URL` or `URL`. Refused, naming the value: an unknown type (with the nearest known
 * one), a type given twice, a second URL without a type, a URL that is not absolute http(s).
 */
export function forwardRoute(text: string, what: string, previous?: ForwardRoutes): ForwardRoutes {
  const routes: ForwardRoutes = { byType: { ...previous?.byType }, ...(previous?.other !== undefined ? { other: previous.other } : {}) };
  const eq = text.indexOf('=');
  // a URL's own `=` (in its query) comes after its scheme's `:`; a type has neither `:` nor `/`
  const typed = eq >= 0 && !/[:/]/.test(text.slice(0, eq));
  if (!typed) {
    const problem = urlProblem(text);
    if (problem) throw new UsageError(`${what} ${problem}: "${printable(text)}".`, { hint: 'For example http://localhost:3000/webhooks, or TYPE=URL for one type.' });
    if (routes.other !== undefined) {
      throw new UsageError(`${what} takes one URL without a type (for every other type), and got two: ${printable(routes.other)} and ${printable(text)}.`, {
        hint: `Give the others their type, such as ${what} forecast_hour.available=${printable(text)}.`,
      });
    }
    routes.other = text;
    return routes;
  }
  const type = text.slice(0, eq);
  const to = text.slice(eq + 1);
  const shown = `${what} "${printable(text)}"`;
  if (!type) throw new UsageError(`${shown}: the type before "=" is empty.`, { hint });
  if (!(SUBSCRIPTION_TYPES as readonly string[]).includes(type)) {
    throw new UsageError(`${shown}: no delivery has the type ${printable(type)} (${suggestion(type, SUBSCRIPTION_TYPES)}).`, { hint });
  }
  if (Object.hasOwn(routes.byType, type)) {
    throw new UsageError(`${shown}: ${type} is given twice (${printable(routes.byType[type]!)} and ${printable(to)}); a type goes to one URL.`, { hint });
  }
  const problem = urlProblem(to);
  if (problem) throw new UsageError(`${shown}: the URL ${problem}: "${printable(to)}".`, { hint: `For example ${what} ${type}=http://localhost:3000/webhooks.` });
  routes.byType[type] = to;
  return routes;
}

/** Routes from what the receiver is given: a URL for every type (the library's, the tests'), or routes by type. */
export function routesOf(given: string | ForwardRoutes | undefined): ForwardRoutes | undefined {
  return typeof given === 'string' ? { byType: {}, other: given } : given;
}

/** The URL a delivery of `type` is forwarded to, or undefined when none is given for it. */
export function routeFor(routes: ForwardRoutes, type: string | undefined): string | undefined {
  // own keys only: a body's type may be `constructor` or `__proto__`
  return type !== undefined && Object.hasOwn(routes.byType, type) ? routes.byType[type] : routes.other;
}

/** Why a delivery was not forwarded: its type has no route and there is no URL without a type. */
export function notRouted(type: string | undefined): string {
  return type === undefined ? 'no --forward-to for a delivery without a type' : `no --forward-to for ${type}`;
}

/** The routes as JSON shows them (null and {} when there are none). */
export function shownRoutes(routes: ForwardRoutes | undefined): ShownRoutes {
  return { forward_to: routes?.other ?? null, forward_routes: { ...routes?.byType } };
}

/** Whether routes shown (a running listen's record, an older one included) send anything anywhere. */
export function forwardsAnywhere(shown: Partial<ShownRoutes>): boolean {
  return Boolean(shown.forward_to) || Object.keys(shown.forward_routes ?? {}).length > 0;
}

/** Lines that say where deliveries go, for the ready line and the logs: `TYPE → URL`, then every other type's. */
export function describeRoutes(shown: Partial<ShownRoutes>): string[] {
  const lines = Object.entries(shown.forward_routes ?? {}).map(([type, to]) => `${type} → ${to}`);
  if (!lines.length) return shown.forward_to ? [shown.forward_to] : [];
  lines.push(shown.forward_to ? `every other type → ${shown.forward_to}` : 'every other type: not forwarded (acknowledged; no --forward-to URL without a type)');
  return lines;
}
