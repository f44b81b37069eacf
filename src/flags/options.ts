import { Argument, Option } from 'commander';
import * as DEFAULTS from '../delivery/defaults.js';
import { SCHEMES } from '../signing/layouts.js';
import type { Scheme } from '../signing/layouts.js';
import { formatDuration } from '../util/duration.js';
import { collect, identifier, port, toleranceSeconds, type Parser } from '../util/parse.js';
import type { TypedOption } from './option-types.js';

/**
 * An option whose value goes through `parse` (src/util/parse.ts) when commander reads it, so the
 * command's options hold the parsed value; errors name the option by its own flag. `fallback` is the
 * parsed default and how help shows it.
 */
export function valued<F extends string, T>(flags: F, description: string, parse: Parser<T>): TypedOption<F, T | undefined>;
export function valued<F extends string, T>(flags: F, description: string, parse: Parser<T>, fallback: [value: T, shown: string]): TypedOption<F, T>;
export function valued<T>(flags: string, description: string, parse: Parser<T>, fallback?: [value: T, shown: string]): Option {
  const option = new Option(flags, description);
  const name = option.long ?? option.short ?? flags;
  option.argParser((text: string) => parse(text, name));
  if (fallback) option.default(fallback[0], fallback[1]);
  return option;
}

/** A duration from the table of defaults (src/delivery/defaults.ts), and how help shows it. */
export const msDefault = (ms: number): [number, string] => [ms, formatDuration(ms)];

/** A size from the table of defaults, and how help shows it (`25MiB`). */
export function sizeDefault(bytes: number): [number, string] {
  const units = ['B', 'KiB', 'MiB', 'GiB'];
  let n = bytes;
  let unit = 0;
  while (unit < units.length - 1 && n >= 1024 && n % 1024 === 0) (n /= 1024), unit++;
  return [bytes, `${n}${units[unit]}`];
}

/** A repeatable option, each value through `parse` when given. */
export function repeatable<T = string>(flags: string, description: string, parse?: Parser<T>): Option {
  const option = new Option(flags, description);
  const name = option.long ?? flags;
  option.argParser((text: string, previous: T[] | undefined) => [...(previous ?? []), parse ? parse(text, name) : (text as T)]);
  return option;
}

/**
 * A repeatable option whose values add up to one (`--forward-to TYPE=URL ...`): `parse` is given each
 * value with what the ones before it made, so that it can refuse what they clash with.
 */
export function accumulated<F extends string, T>(flags: F, description: string, parse: (text: string, what: string, previous: T | undefined) => T): TypedOption<F, T | undefined> {
  const option = new Option(flags, description);
  const name = option.long ?? flags;
  option.argParser((text: string, previous: T | undefined) => parse(text, name, previous));
  return option;
}

export { collect };

/** `--port`, with each command's own default. */
export const portOption = (fallback: number, what = 'port to listen on (0 picks a free one)'): TypedOption<'--port <port>', number> =>
  valued('--port <port>', what, port, [fallback, String(fallback)]);

/** `--scheme`: its choices are the layout table's names. */
export const schemeOption = (description: string) => new Option('--scheme <name>', description).choices(SCHEMES).default(DEFAULTS.scheme) as TypedOption<'--scheme <name>', Scheme>;

/** `--tolerance`: the same limits wherever a timestamp is checked. */
export const toleranceOption = (description: string): TypedOption<'--tolerance <seconds>', number> =>
  valued('--tolerance <seconds>', description, toleranceSeconds, [DEFAULTS.toleranceSeconds, String(DEFAULTS.toleranceSeconds)]);

/** An identifier argument (a webhook or subscription id), checked as it is read: safe in a URL path. */
export const idArgument = (name: string, description: string): Argument => new Argument(name, description).argParser((text: string) => identifier(text, `The ${description.replace(/^the /, '')}`));
