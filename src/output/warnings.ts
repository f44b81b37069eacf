import { line, type Context } from '../context.js';
import { unknownTypes } from '../tasks/unknown.js';
import { printable } from '../util/printable.js';

/** Warns, on stderr, about subscription types wxhooks does not know: they are sent anyway, since the service may know more. */
export function warnUnknownTypes(ctx: Context, types: readonly string[]): void {
  for (const text of unknownTypes(types)) line(ctx.stderr, `warning: ${printable(text)}`);
}

/** Warns, on stderr, about response types wxhooks does not know: sent anyway, as for subscription types. */
export function warnUnknownResponses(ctx: Context, responses: readonly (string | undefined)[]): void {
  for (const text of unknownTypes([], responses)) line(ctx.stderr, `warning: ${printable(text)}`);
}
