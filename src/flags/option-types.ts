import type { Command, Option } from 'commander';

/**
 * The options a command's flag declarations give its run function, as a type derived from the
 * declarations themselves (as @commander-js/extra-typings does, in the few lines wxhooks needs), so that
 * a flag is declared once and its options interface is never copied by hand.
 */

/** An option that carries, for the type checker only, its flags and the type of its value (`valued` makes them). */
export type TypedOption<F extends string, T> = Option & { readonly __typed?: [flags: F, value: T] };

type Camel<S extends string> = S extends `${infer Head}-${infer Tail}` ? `${Head}${Capitalize<Camel<Tail>>}` : S;
type Long<F extends string> = F extends `${string}--${infer Rest}` ? (Rest extends `${infer Name} ${string}` ? Name : Rest) : never;
/** The option's name in the parsed options: commander's attributeName (`--no-init-event` gives `initEvent`). */
export type KeyOf<F extends string> = Long<F> extends `no-${infer Name}` ? Camel<Name> : Camel<Long<F>>;
/** What a flag without a parser holds: `--x <v>` a string, `--x [v]` a string or true, `--no-x` a boolean, `--x` true. */
type Plain<F extends string> = F extends `${string}<${string}>${string}`
  ? string | undefined
  : F extends `${string}[${string}]${string}`
    ? string | true | undefined
    : Long<F> extends `no-${string}`
      ? boolean
      : true | undefined;
/** One option: optional when it may be left out (no default), required when it always has a value. */
type Entry<F extends string, T> = undefined extends T ? { [K in KeyOf<F>]?: Exclude<T, undefined> } : { [K in KeyOf<F>]: T };
type Flatten<O> = { [K in keyof O]: O[K] } & {};

/** A command being declared, with the options declared so far in its type; `cmd` is commander's own. */
export interface Declared<O> {
  readonly cmd: Command;
  option<F extends string>(flags: F, description: string): Declared<O & Entry<F, Plain<F>>>;
  option<F extends string>(flags: F, description: string, fallback: string): Declared<O & Entry<F, string>>;
  option<F extends string, T>(flags: F, description: string, parse: (value: string, previous: T) => T): Declared<O & Entry<F, T | undefined>>;
  addOption<F extends string, T>(option: TypedOption<F, T>): Declared<O & Entry<F, T>>;
  optionsGroup(heading: string): Declared<O>;
  /** Declares more options with a helper of commander's kind, whose options the type `More` names. */
  with<More>(declare: (cmd: Command) => unknown): Declared<O & More>;
}

/** The options the declarations give: `type XxxOptions = OptionsOf<ReturnType<typeof declareXxx>>`. */
export type OptionsOf<D> = D extends Declared<infer O> ? Flatten<O> : never;

/** `true` when A and B are the same type (an options type written out, and the one its flags give), else `false`. */
export type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
/** A type error unless `T` is `true`: `type _Checked = Expect<Same<A, B>>`. */
export type Expect<T extends true> = T;

/** Starts declaring `cmd`'s options; each call goes to commander unchanged. */
export function declare(cmd: Command): Declared<object> {
  const self: Declared<object> = {
    cmd,
    option: (flags: string, description: string, third?: unknown) => {
      if (third === undefined) cmd.option(flags, description);
      else if (typeof third === 'function') cmd.option(flags, description, third as (value: string, previous: unknown) => unknown);
      else cmd.option(flags, description, third as string);
      return self;
    },
    addOption: (option: Option) => {
      cmd.addOption(option);
      return self;
    },
    optionsGroup: (heading: string) => {
      cmd.optionsGroup(heading);
      return self;
    },
    with: (more: (cmd: Command) => unknown) => {
      more(cmd);
      return self;
    },
  } as Declared<object>;
  return self;
}
