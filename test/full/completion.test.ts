import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli.js';
import type { RunningEmulator } from '../../src/emulator/server.js';
import { commandPaths } from '../../src/commands/completion.js';
import { SUBSCRIPTION_TYPES } from '../../src/vocabulary.js';
import { BIN, tempDir } from '../helpers/cli.js';
import { runInProcess, testIo } from '../helpers/context.js';
import { emulatorFor } from '../helpers/emulator.js';

// Every command path, completed by each shell's own completion machinery (bash's complete -F function,
// zsh's compadd, fish's complete -C), against what the command tree says. The shells are installed by
// .ci/run (apt-get install zsh fish) where they are missing.

interface Case {
  words: string[];
  expected: string[];
}

let cases: Case[] = [];
const scripts: Record<string, string> = {};

beforeAll(async () => {
  const program = await buildProgram(['node', 'wxhooks', 'completion', 'bash'], testIo());
  cases = commandPaths(program).flatMap((n) => {
    const words = n.path ? ['wxhooks', ...n.path.split(' ')] : ['wxhooks'];
    const out: Case[] = [{ words: [...words, '--'], expected: n.flags.map((f) => f.name).filter((f) => f.startsWith('--')) }];
    if (n.subs.length) out.push({ words: [...words, ''], expected: n.subs.map((s) => s.name) });
    return out;
  });
  for (const shell of ['bash', 'zsh', 'fish']) {
    const r = await runInProcess(['completion', shell]);
    expect(r.code).toBe(0);
    scripts[shell] = join(tempDir(), `wxhooks.${shell}`);
    writeFileSync(scripts[shell]!, r.stdout);
  }
});

const sorted = (line: string) => line.split(/\s+/).filter(Boolean).sort();
const quote = (w: string) => `'${w}'`;

function shellPresent(shell: string): void {
  const found = spawnSync(shell, ['-c', 'exit 0']).status === 0;
  if (!found) throw new Error(`${shell} is not installed: install it (Debian: apt-get install ${shell}), as .ci/run does`);
}

/** Runs `driver` (which prints one line per case) in the shell, and compares each line with the case. */
function check(shell: string, driver: string, args: string[] = ['-c']) {
  shellPresent(shell);
  const out = execFileSync(shell, [...args, driver], { encoding: 'utf8' }).split('\n');
  const wrong = cases.map((c, i) => ({ typed: c.words.join(' '), got: sorted(out[i] ?? ''), expected: [...c.expected].sort() })).filter((x) => x.got.join(' ') !== x.expected.join(' '));
  expect(wrong).toEqual([]);
  expect(cases.length).toBeGreaterThan(30);
}

describe('completion, run by each shell, for every command path', () => {
  it('bash', () => {
    const lines = cases.map((c) => `COMP_WORDS=(${c.words.map(quote).join(' ')}); COMP_CWORD=${c.words.length - 1}; COMPREPLY=(); _wxhooks; echo "\${COMPREPLY[*]}"`);
    check('bash', `source ${scripts.bash}\n${lines.join('\n')}`);
  });

  it('zsh', () => {
    const lines = cases.map((c) => `words=(${c.words.map(quote).join(' ')}); CURRENT=${c.words.length}; got=(); _wxhooks; print -r -- "\${got[*]}"`);
    // compadd is zsh's: outside a completion it cannot run, so it is stood in for by one that keeps what it is given (as zsh would, by prefix)
    // and _describe (name:description pairs, from the array named last) likewise
    const stub =
      // biome-ignore lint/suspicious/noTemplateCurlyInString: zsh's own ${...}, not a template
      'compdef() { :; }\ncompadd() { shift; local w; for w in "$@"; do [[ $w == ${words[CURRENT]}* ]] && got+=($w); done }\n' +
      // biome-ignore lint/suspicious/noTemplateCurlyInString: zsh's own ${...}, not a template
      '_describe() { local x; for x in "${(@P)4}"; do x=${x%%:*}; [[ $x == ${words[CURRENT]}* ]] && got+=($x); done }';
    check('zsh', `${stub}\nsource ${scripts.zsh}\n${lines.join('\n')}`);
  });

  it('fish', () => {
    const lines = cases.map((c) => `echo (complete -C ${quote(c.words.join(' '))} | string split -f1 \\t)`);
    check('fish', `source ${scripts.fish}\n${lines.join('\n')}`);
  });

  it("fish offers a command's own flags, not another's of the same name (secret list is not webhook list)", () => {
    shellPresent('fish');
    const out = execFileSync('fish', ['-c', `source ${scripts.fish}; complete -C 'wxhooks secret list --' | string split -f1 \\t`], { encoding: 'utf8' });
    expect(sorted(out)).not.toContain('--active');
    expect(sorted(out)).toContain('--json');
  });

  it('zsh: loads its completion system itself when ~/.zshrc has no compinit, and describes each command and flag', () => {
    shellPresent('zsh');
    const r = spawnSync('zsh', ['-f', '-c', `source ${scripts.zsh}; print -r -- \${+functions[compdef]}; _wxhooks_subs_described ''; print -r -- "\${reply[*]}"`], {
      encoding: 'utf8',
      env: { ...process.env, HOME: tempDir() },
    });
    expect(r.stderr).not.toContain('command not found');
    const [defined, described] = r.stdout.split('\n');
    expect(defined).toBe('1');
    expect(described).toContain('webhook:create, list, show, change and delete webhooks');
  });

  it("the values of arguments and flags: types after trigger and --subscribe, shells after completion, a flag's choices", () => {
    shellPresent('bash');
    const ask = (words: string[]) => `COMP_WORDS=(${[...words, ''].map(quote).join(' ')}); COMP_CWORD=${words.length}; COMPREPLY=(); _wxhooks; echo "\${COMPREPLY[*]}"`;
    const out = execFileSync(
      'bash',
      [
        '-c',
        `source ${scripts.bash}\n${[
          ['wxhooks', 'trigger'],
          ['wxhooks', 'completion'],
          ['wxhooks', 'listen', '--subscribe'],
          ['wxhooks', 'listen', '--scheme'],
          ['wxhooks', 'subscription', 'add', '7'],
        ]
          .map(ask)
          .join('\n')}`,
      ],
      { encoding: 'utf8' },
    ).split('\n');
    expect(sorted(out[0]!)).toEqual([...SUBSCRIPTION_TYPES, 'run'].sort());
    expect(sorted(out[1]!)).toEqual(['bash', 'fish', 'zsh']);
    expect(sorted(out[2]!)).toEqual([...SUBSCRIPTION_TYPES].sort());
    expect(sorted(out[3]!)).toEqual(['auto', 'hex-body', 'hex-timestamp', 'standard', 'stripe']);
    expect(sorted(out[4]!)).toEqual([...SUBSCRIPTION_TYPES].sort());
    shellPresent('fish');
    const fish = execFileSync('fish', ['-c', `source ${scripts.fish}; complete -C 'wxhooks completion ' | string split -f1 \\t; true`], { encoding: 'utf8' });
    expect(sorted(fish)).toEqual(['bash', 'fish', 'zsh']);
  });
});

describe('the values the store holds (#34, section 3)', () => {
  let emu: RunningEmulator;
  let env: Record<string, string>;
  emulatorFor({}, (made) => ({ emu, env } = made));

  it('--webhook <TAB> offers the ids in the secret store, in bash, zsh and fish', async () => {
    const dir = tempDir();
    const e = { ...env, WXHOOKS_CONFIG_DIR: dir };
    for (const id of ['3', '12']) expect((await runInProcess(['secret', 'set', id], { env: e, stdin: 'whsec_eA==' })).code).toBe(0);
    const bin = join(tempDir(), 'bin');
    mkdirSync(bin);
    symlinkSync(BIN, join(bin, 'wxhooks'));
    const shellEnv = { ...process.env, ...e, PATH: `${bin}:${process.env.PATH}` };
    const scripts: Record<string, string> = {};
    for (const shell of ['bash', 'zsh', 'fish']) {
      scripts[shell] = join(dir, `completion.${shell}`);
      writeFileSync(scripts[shell], (await runInProcess(['completion', shell])).stdout);
    }
    const script = (shell: string) => scripts[shell]!;
    const sorted = (text: string) => text.split(/\s+/).filter(Boolean).sort();
    const bash = execFileSync(
      'bash',
      [
        '-c',
        `source ${script('bash')}; COMP_WORDS=(wxhooks listen --webhook ''); COMP_CWORD=3; _wxhooks; echo "\${COMPREPLY[*]}"; COMP_WORDS=(wxhooks webhook get ''); COMP_CWORD=3; _wxhooks; echo "\${COMPREPLY[*]}"`,
      ],
      { env: shellEnv, encoding: 'utf8' },
    ).split('\n');
    expect(sorted(bash[0]!)).toEqual(['12', '3']);
    expect(sorted(bash[1]!)).toEqual(['12', '3']);
    const stub = 'compdef() { :; }\ncompadd() { shift; got+=("$@") }';
    const zsh = execFileSync('zsh', ['-f', '-c', `${stub}\nsource ${script('zsh')}\nwords=(wxhooks doctor --webhook ''); CURRENT=4; got=(); _wxhooks; print -r -- "\${got[*]}"`], {
      env: shellEnv,
      encoding: 'utf8',
    });
    expect(sorted(zsh)).toEqual(['12', '3']);
    const fish = execFileSync('fish', ['-c', `source ${script('fish')}; complete -C 'wxhooks listen --webhook ' | string split -f1 \\t`], { env: shellEnv, encoding: 'utf8' });
    expect(sorted(fish)).toEqual(['12', '3']);
  }, 90_000); // each Tab above runs wxhooks: four processes, slow on a loaded machine
});
