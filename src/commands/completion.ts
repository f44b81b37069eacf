import type { Command } from 'commander';
import type { Act } from '../cli.js';
import { UsageError } from '../errors.js';
import type { Context } from '../context.js';

/**
 * Completion scripts generated from the commander tree itself, so they never
 * drift from the commands. (The completion libraries on npm want a runtime
 * hook in the binary; a static script is faster at every Tab.)
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

interface Node {
  path: string;
  subs: { name: string; description: string }[];
  options: string[];
}

function walk(cmd: Command, path: string, inherited: string[], out: Node[]): void {
  const own = cmd.options.flatMap((o) => [o.long, o.short].filter((f): f is string => Boolean(f)));
  const options = [...new Set([...inherited, ...own, '--help'])];
  out.push({ path, subs: cmd.commands.map((c) => ({ name: c.name(), description: c.description() })), options });
  for (const sub of cmd.commands) walk(sub, path ? `${path} ${sub.name()}` : sub.name(), inherited.length ? inherited : own, out);
}

const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

export function bashScript(program: Command): string {
  const nodes: Node[] = [];
  walk(program, '', [], nodes);
  const subs = nodes.map((n) => `    ${q(n.path)}) echo ${q(n.subs.map((s) => s.name).join(' '))} ;;`).join('\n');
  const opts = nodes.map((n) => `    ${q(n.path)}) echo ${q(n.options.join(' '))} ;;`).join('\n');
  return `# wxhooks completion for bash
_wxhooks_subs() {
  case "$1" in
${subs}
  esac
}
_wxhooks_opts() {
  case "$1" in
${opts}
  esac
}
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

export function zshScript(program: Command): string {
  return `#compdef wxhooks
# wxhooks completion for zsh (through zsh's bash completion layer)
autoload -U +X bashcompinit && bashcompinit
${bashScript(program)}`;
}

export function fishScript(program: Command): string {
  const nodes: Node[] = [];
  walk(program, '', [], nodes);
  const lines = ['# wxhooks completion for fish', 'complete -c wxhooks -f'];
  for (const n of nodes) {
    const words = n.path ? n.path.split(' ') : [];
    const children = n.subs.map((s) => s.name).join(' ');
    const cond = words.length === 0 ? '__fish_use_subcommand' : `__fish_seen_subcommand_from ${words[words.length - 1]}`;
    for (const s of n.subs) {
      const guard = words.length && children ? `; and not __fish_seen_subcommand_from ${children}` : '';
      lines.push(`complete -c wxhooks -n ${q(cond + guard)} -a ${q(s.name)} -d ${q(s.description.slice(0, 60))}`);
    }
    if (words.length === 0) {
      for (const o of n.options.filter((o) => o.startsWith('--'))) lines.push(`complete -c wxhooks -l ${o.slice(2)}`);
    } else {
      for (const o of n.options.filter((o) => o.startsWith('--'))) lines.push(`complete -c wxhooks -n ${q(cond)} -l ${o.slice(2)}`);
    }
  }
  return `${[...new Set(lines)].join('\n')}\n`;
}

export async function runCompletion(ctx: Context, program: Command, shell: string): Promise<void> {
  const make = { bash: bashScript, zsh: zshScript, fish: fishScript }[shell];
  if (!make) throw new UsageError(`Unknown shell "${shell}".`, { hint: 'Choose bash, zsh or fish.' });
  ctx.stdout.write(make(program));
}
