import { line, type Context } from '../context.js';
import { printable } from '../util/printable.js';
import { isKnownType, RESPONSE_TYPES, SUBSCRIPTION_TYPES, suggestion } from '../vocabulary.js';

/** Warns, on stderr, about subscription types wxhooks does not know: they are sent anyway, since the service may know more. */
export function warnUnknownTypes(ctx: Context, types: readonly string[]): void {
  for (const t of types) {
    if (!isKnownType(t)) line(ctx.stderr, `warning: "${printable(t)}" is not a subscription type wxhooks knows (${suggestion(t, SUBSCRIPTION_TYPES)}); sending it anyway.`);
  }
}

/** Warns, on stderr, about response types wxhooks does not know: sent anyway, as for subscription types. */
export function warnUnknownResponses(ctx: Context, responses: readonly (string | undefined)[]): void {
  for (const r of responses) {
    if (r !== undefined && !(RESPONSE_TYPES as readonly string[]).includes(r)) {
      line(ctx.stderr, `warning: "${printable(r)}" is not a response type wxhooks knows (${suggestion(r, RESPONSE_TYPES)}); sending it anyway.`);
    }
  }
}
