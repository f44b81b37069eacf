import type { Command } from 'commander';
import type { Act, Context } from '../context.js';
import { UsageError } from '../errors.js';

/**
 * Completion scripts generated from the commander tree itself, so they never drift from the commands:
 * every command path (`secret list`, `webhook create`) with its own sub-commands and its own flags, the
 * global ones included. (The completion libraries on npm want a runtime hook in the binary; a static
 * script is faster at every Tab.)
 */
export function register(cmd: Command, act: Act): void {
  cmd
    .argument('<shell>', 'bash, zsh or fish')
    .addHelpText(
      'after',
      `
Examples:
  $ wxhooks completion bash > /etc/bash_completion.d/wxhooks     # or: source <(wxhooks completion bash)
  $ wxhooks completion zsh > "\${fpath[1]}/_wxhooks"               # or: source <(wxhooks completion zsh) in ~/.zshrc
  $ wxhooks completion fish > ~/.config/fish/completions/wxhooks.fish`,
    )
    .action(act(async (ctx: Context, shell: string) => runCompletion(ctx, cmd.parent!, shell)));
}

interface Flag {
  name: string;
  takesValue: boolean;
  description: string;
}

/** One command path of the tree: its sub-commands, and every flag it accepts. */
interface Node {
  path: string;
  subs: { name: string; description: string }[];
  flags: Flag[];
}

export function commandPaths(program: Command): Node[] {
  const out: Node[] = [];
  const flagsOf = (cmd: Command): Flag[] =>
    cmd.options.flatMap((o) =>
      [o.long, o.short].filter((f): f is string => Boolean(f)).map((name) => ({ name, takesValue: o.required || o.optional, description: o.description })),
    );
  const help: Flag = { name: '--help', takesValue: false, description: 'show help' };
  const globals = flagsOf(program);
  const walk = (cmd: Command, path: string) => {
    const own = cmd === program ? [] : flagsOf(cmd);
    const seen = new Set<string>();
    const flags = [...globals, ...own, help].filter((f) => !seen.has(f.name) && seen.add(f.name));
    out.push({ path, subs: cmd.commands.map((c) => ({ name: c.name(), description: c.description() })), flags });
    for (const sub of cmd.commands) walk(sub, path ? `${path} ${sub.name()}` : sub.name());
  };
  walk(program, '');
  return out;
}

const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** The two lookup tables every shell's script starts from: a path's sub-commands, and its flags. */
/** `_wxhooks_subs PATH` and `_wxhooks_opts PATH`, as bash and zsh both read them: a path's sub-commands, and its flags. */
function lookups(program: Command): string {
  const nodes = commandPaths(program);
  const lookup = (name: string, words: (n: Node) => string[]) =>
    `${name}() {\n  case "$1" in\n${nodes.map((n) => `    ${q(n.path)}) echo ${q(words(n).join(' '))} ;;`).join('\n')}\n  esac\n}`;
  return `${lookup('_wxhooks_subs', (n) => n.subs.map((s) => s.name))}\n${lookup('_wxhooks_opts', (n) => n.flags.map((f) => f.name))}`;
}

export function bashScript(program: Command): string {
  return `# wxhooks completion for bash
${lookups(program)}
_wxhooks() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" path="" w i subs
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    subs=" $(_wxhooks_subs "$path") "
    if [[ "$subs" == *" $w "* ]]; then path="\${path:+$path }$w"; fi
  done
  if [[ "$cur" == -* ]]; then
    COMPREPLY=( $(compgen -W "$(_wxhooks_opts "$path")" -- "$cur") )
  else
    COMPREPLY=( $(compgen -W "$(_wxhooks_subs "$path")" -- "$cur") )
  fi
}
complete -o default -F _wxhooks wxhooks
`;
}

/** zsh's own completion (not its bash layer: bash's 0-based COMP_WORDS and zsh's 1-based arrays disagree). */
export function zshScript(program: Command): string {
  return `#compdef wxhooks
# wxhooks completion for zsh
${lookups(program)}
_wxhooks() {
  local cmdpath="" w i
  for ((i = 2; i < CURRENT; i++)); do
    w=\${words[i]}
    if [[ " $(_wxhooks_subs "$cmdpath") " == *" $w "* ]]; then cmdpath="\${cmdpath:+$cmdpath }$w"; fi
  done
  if [[ \${words[CURRENT]} == -* ]]; then
    compadd -- \${=$(_wxhooks_opts "$cmdpath")}
  else
    compadd -- \${=$(_wxhooks_subs "$cmdpath")}
  fi
}
if [[ \${zsh_eval_context[-1]} == loadautofunc ]]; then
  _wxhooks "$@"
else
  compdef _wxhooks wxhooks
fi
`;
}

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
    for (const f of n.flags) {
      const flag = f.name.startsWith('--') ? `-l ${f.name.slice(2)}` : `-s ${f.name.slice(1)}`;
      lines.push(`complete -c wxhooks -n ${at} ${flag}${f.takesValue ? ' -r' : ''} -d ${q(f.description.slice(0, 60))}`);
    }
  }
  return `${lines.join('\n')}\n`;
}

export async function runCompletion(ctx: Context, program: Command, shell: string): Promise<void> {
  const make = { bash: bashScript, zsh: zshScript, fish: fishScript }[shell];
  if (!make) throw new UsageError(`Unknown shell "${shell}".`, { hint: 'Choose bash, zsh or fish.' });
  ctx.stdout.write(make(program));
}
