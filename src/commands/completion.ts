import { Argument, Option, type Command } from 'commander';
import type { Act, Context } from '../context.js';
import { UsageError } from '../errors.js';
import { RESPONSE_TYPES, SUBSCRIPTION_TYPES } from '../vocabulary.js';
import { baseUrlFor } from '../tasks/service.js';
import { secretStoreFor } from '../tasks/secrets.js';

/**
 * Completion scripts generated from the commander tree itself, so they never drift from the commands:
 * every command path (`secret list`, `webhook create`) with its own sub-commands and its own flags, the
 * global ones included. (The completion libraries on npm want a runtime hook in the binary; a static
 * script is faster at every Tab.)
 */
export const SHELLS: string[] = ['bash', 'zsh', 'fish'];

/**
 * What a script offers in place of values known when it is made: the webhook ids of the secret store,
 * asked of `wxhooks completion --webhook-ids` at each Tab (the store changes; the script does not).
 */
export const WEBHOOK_IDS = '@webhook-ids';

export function register(cmd: Command, act: Act): void {
  cmd
    .addArgument(new Argument('[shell]', 'bash, zsh or fish').choices(SHELLS))
    .addOption(new Option('--webhook-ids', 'print the ids of the webhooks whose secret is stored (what the scripts offer after --webhook)').hideHelp())
    .addHelpText(
      'after',
      `
Examples:
  $ wxhooks completion bash > /etc/bash_completion.d/wxhooks     # or: source <(wxhooks completion bash)
  $ wxhooks completion zsh > "\${fpath[1]}/_wxhooks"               # or: source <(wxhooks completion zsh) in ~/.zshrc
  $ wxhooks completion fish > ~/.config/fish/completions/wxhooks.fish`,
    )
    .action(act(async (ctx: Context, shell: string | undefined, o: { webhookIds?: boolean }) => (o.webhookIds ? runWebhookIds(ctx) : runCompletion(ctx, cmd.parent!, shell))));
}

/**
 * The ids of the webhooks whose secret is stored, one a line: of the service in use (the base URL), else
 * of every service in the store. Quiet: a Tab must never print an error into the command line.
 */
export async function runWebhookIds(ctx: Context): Promise<void> {
  const stored = await (await secretStoreFor(ctx)).list().catch(() => []);
  const base = await baseUrlFor(ctx).then(
    (b) => b.url,
    () => undefined,
  );
  const mine = stored.filter((s) => s.base_url === base);
  const ids = [...new Set((mine.length ? mine : stored).map((s) => s.webhook_id))].sort((a, b) => Number(a) - Number(b) || a.localeCompare(b));
  if (ids.length) ctx.stdout.write(`${ids.join('\n')}\n`);
}

interface Flag {
  name: string;
  takesValue: boolean;
  description: string;
  /** The values it takes, when they are known: its choices, else FLAG_VALUES. */
  values?: string[];
}

/** One command path of the tree: its sub-commands, every flag it accepts, and the values its arguments take. */
interface Node {
  path: string;
  subs: { name: string; description: string }[];
  flags: Flag[];
  /** What its positional arguments may be (a subscription type, a shell): offered where no sub-command is. */
  values: string[];
}

/**
 * The values of arguments and flags that commander's tree does not list as choices because others are
 * allowed too (an unknown subscription type is sent with a warning): offered by completion all the same.
 */
const ARGUMENT_VALUES: Record<string, readonly string[]> = {
  trigger: [...SUBSCRIPTION_TYPES, 'run'],
  'subscription add': SUBSCRIPTION_TYPES,
};
const FLAG_VALUES: Record<string, readonly string[]> = {
  '--webhook': [WEBHOOK_IDS],
  '--subscribe': SUBSCRIPTION_TYPES,
  '--until': SUBSCRIPTION_TYPES,
  '--type': SUBSCRIPTION_TYPES,
  '--response': RESPONSE_TYPES,
};

export function commandPaths(program: Command): Node[] {
  const out: Node[] = [];
  const flagsOf = (cmd: Command): Flag[] =>
    cmd.options
      .filter((o) => !o.hidden)
      .flatMap((o) =>
        [o.long, o.short]
          .filter((f): f is string => Boolean(f))
          .map((name) => {
            const takesValue = o.required || o.optional;
            const values = o.argChoices?.length ? [...o.argChoices] : takesValue && o.long && FLAG_VALUES[o.long] ? [...FLAG_VALUES[o.long]!] : undefined;
            return { name, takesValue, description: o.description, ...(values ? { values } : {}) };
          }),
      );
  const help: Flag = { name: '--help', takesValue: false, description: 'show help' };
  const globals = flagsOf(program);
  const walk = (cmd: Command, path: string) => {
    const own = cmd === program ? [] : flagsOf(cmd);
    const seen = new Set<string>();
    const flags = [...globals, ...own, help].filter((f) => !seen.has(f.name) && seen.add(f.name));
    // a command whose first argument is a webhook id (webhook get, secret show, ping...) is offered the stored ids
    const firstIsWebhook = cmd.registeredArguments[0]?.description === 'the webhook id';
    const values = ARGUMENT_VALUES[path] ?? (firstIsWebhook ? [WEBHOOK_IDS] : cmd.registeredArguments.flatMap((a) => a.argChoices ?? []));
    out.push({ path, subs: cmd.commands.map((c) => ({ name: c.name(), description: c.description() })), flags, values: [...values] });
    for (const sub of cmd.commands) walk(sub, path ? `${path} ${sub.name()}` : sub.name());
  };
  walk(program, '');
  return out;
}

const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * The lookup tables bash's and zsh's scripts read: `_wxhooks_subs PATH` (a path's sub-commands),
 * `_wxhooks_opts PATH` (its flags), `_wxhooks_args PATH` (what its arguments may be) and
 * `_wxhooks_values FLAG` (what a flag's value may be).
 */
function lookups(program: Command): string {
  const expand = `_wxhooks_expand() {\n  if [[ "$1" == ${WEBHOOK_IDS} ]]; then command wxhooks completion --webhook-ids 2>/dev/null; else echo "$1"; fi\n}`;
  return `${tables(program)}\n${expand}`;
}

function tables(program: Command): string {
  const nodes = commandPaths(program);
  const lookup = (name: string, words: (n: Node) => string[]) => `${name}() {\n  case "$1" in\n${nodes.map((n) => `    ${q(n.path)}) echo ${q(words(n).join(' '))} ;;`).join('\n')}\n  esac\n}`;
  const values = nodes.flatMap((n) => n.flags.filter((f) => f.values).map((f) => [`${n.path} ${f.name}`, f.values!] as const));
  const valueLookup = `_wxhooks_values() {\n  case "$1 $2" in\n${values.map(([key, v]) => `    ${q(key)}) echo ${q(v.join(' '))} ;;`).join('\n')}\n  esac\n}`;
  return [lookup('_wxhooks_subs', (n) => n.subs.map((s) => s.name)), lookup('_wxhooks_opts', (n) => n.flags.map((f) => f.name)), lookup('_wxhooks_args', (n) => n.values), valueLookup].join('\n');
}

export function bashScript(program: Command): string {
  return `# wxhooks completion for bash
${lookups(program)}
_wxhooks() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="\${COMP_WORDS[COMP_CWORD-1]}" path="" w i subs values
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    subs=" $(_wxhooks_subs "$path") "
    if [[ "$subs" == *" $w "* ]]; then path="\${path:+$path }$w"; fi
  done
  values="$(_wxhooks_values "$path" "$prev")"
  if [[ -n "$values" ]]; then
    compopt +o default 2>/dev/null
    COMPREPLY=( $(compgen -W "$(_wxhooks_expand "$values")" -- "$cur") )
  elif [[ "$cur" == -* ]]; then
    COMPREPLY=( $(compgen -W "$(_wxhooks_opts "$path")" -- "$cur") )
  else
    subs="$(_wxhooks_subs "$path")"
    COMPREPLY=( $(compgen -W "\${subs:-$(_wxhooks_expand "$(_wxhooks_args "$path")")}" -- "$cur") )
  fi
}
complete -o default -F _wxhooks wxhooks
`;
}

/**
 * zsh's own completion (not its bash layer: bash's 0-based COMP_WORDS and zsh's 1-based arrays
 * disagree), with each sub-command's and flag's description, as fish shows them. It loads zsh's
 * completion system itself when the shell has not (no \`compinit\` in ~/.zshrc).
 */
export function zshScript(program: Command): string {
  const nodes = commandPaths(program);
  const described = (name: string, pick: (n: Node) => { name: string; description: string }[]) =>
    `${name}() {\n  case "$1" in\n${nodes
      .map(
        (n) =>
          `    ${q(n.path)}) reply=(${pick(n)
            .map((x) => q(`${x.name.replace(/:/g, '\\:')}:${x.description.slice(0, 70)}`))
            .join(' ')}) ;;`,
      )
      .join('\n')}\n  esac\n}`;
  return `#compdef wxhooks
# wxhooks completion for zsh
${lookups(program)}
${described('_wxhooks_subs_described', (n) => n.subs)}
${described('_wxhooks_opts_described', (n) => n.flags)}
_wxhooks() {
  local cmdpath="" w i values
  local -a reply
  for ((i = 2; i < CURRENT; i++)); do
    w=\${words[i]}
    if [[ " $(_wxhooks_subs "$cmdpath") " == *" $w "* ]]; then cmdpath="\${cmdpath:+$cmdpath }$w"; fi
  done
  values="$(_wxhooks_expand "$(_wxhooks_values "$cmdpath" "\${words[CURRENT-1]}")")"
  if [[ -n $(_wxhooks_values "$cmdpath" "\${words[CURRENT-1]}") ]]; then
    compadd -- \${=values}
  elif [[ \${words[CURRENT]} == -* ]]; then
    _wxhooks_opts_described "$cmdpath"
    _describe -t options 'option' reply
  elif [[ -n $(_wxhooks_subs "$cmdpath") ]]; then
    _wxhooks_subs_described "$cmdpath"
    _describe -t commands 'command' reply
  else
    compadd -- \${=$(_wxhooks_expand "$(_wxhooks_args "$cmdpath")")}
  fi
}
if [[ \${zsh_eval_context[-1]} == loadautofunc ]]; then
  _wxhooks "$@"
else
  (( \${+functions[compdef]} )) || { autoload -Uz compinit && compinit -i; }
  compdef _wxhooks wxhooks
fi
`;
}

/** Values for fish's -a: a list, or the stored webhook ids asked for at each Tab. */
const fishValues = (values: string[]) => (values[0] === WEBHOOK_IDS ? q('(command wxhooks completion --webhook-ids 2>/dev/null)') : q(values.join(' ')));

/**
 * Fish decides each completion by a condition; here the condition is the whole command path typed so
 * far (`__wxhooks_path`), so `secret list --<Tab>` offers secret list's flags, not webhook list's.
 */
export function fishScript(program: Command): string {
  const nodes = commandPaths(program);
  const lines = [
    '# wxhooks completion for fish',
    'function __wxhooks_subs',
    '    switch "$argv[1]"',
    ...nodes.filter((n) => n.subs.length).flatMap((n) => [`        case ${q(n.path)}`, `            printf '%s\\n' ${n.subs.map((s) => q(s.name)).join(' ')}`]),
    '    end',
    'end',
    'function __wxhooks_path',
    '    set -l path ""',
    '    for word in (commandline -opc)[2..-1]',
    '        if contains -- $word (__wxhooks_subs "$path")',
    '            if test -z "$path"',
    '                set path $word',
    '            else',
    '                set path "$path $word"',
    '            end',
    '        end',
    '    end',
    '    echo $path',
    'end',
    'function __wxhooks_at',
    '    set -l path (__wxhooks_path)',
    '    test "$path" = "$argv[1]"',
    'end',
    'complete -c wxhooks -f',
  ];
  for (const n of nodes) {
    const at = q(`__wxhooks_at ${q(n.path)}`);
    for (const s of n.subs) lines.push(`complete -c wxhooks -n ${at} -a ${q(s.name)} -d ${q(s.description.slice(0, 60))}`);
    if (!n.subs.length && n.values.length) lines.push(`complete -c wxhooks -n ${at} -a ${fishValues(n.values)}`);
    for (const f of n.flags) {
      const flag = f.name.startsWith('--') ? `-l ${f.name.slice(2)}` : `-s ${f.name.slice(1)}`;
      // -x (a value, and no file names) where the values are known; -r (a value: file names too) where not
      lines.push(`complete -c wxhooks -n ${at} ${flag}${f.takesValue ? (f.values ? ' -x' : ' -r') : ''}${f.values ? ` -a ${fishValues(f.values)}` : ''} -d ${q(f.description.slice(0, 60))}`);
    }
  }
  return `${lines.join('\n')}\n`;
}

export async function runCompletion(ctx: Context, program: Command, shell: string | undefined): Promise<void> {
  if (shell === undefined) throw new UsageError('Which shell? wxhooks completion bash, zsh or fish.', { hint: 'For example: source <(wxhooks completion bash)' });
  const make = { bash: bashScript, zsh: zshScript, fish: fishScript }[shell];
  if (!make) throw new UsageError(`Unknown shell "${shell}".`, { hint: `Choose ${SHELLS.join(', ')}.` });
  ctx.stdout.write(make(program));
}
