import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli, tempDir } from './helpers/cli.js';

function complete(script: string, words: string[]): string[] {
  const file = join(tempDir(), 'wxhooks.bash');
  writeFileSync(file, script);
  const out = execFileSync('bash', [
    '-c',
    `source ${file}; COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _wxhooks; printf '%s\\n' "\${COMPREPLY[@]}"`,
  ]).toString();
  return out.split('\n').filter(Boolean);
}

describe('completion', () => {
  it('bash completes command groups, sub-commands and flags', async () => {
    const r = await runCli(['completion', 'bash']);
    expect(r.code).toBe(0);
    expect(complete(r.stdout, ['wxhooks', ''])).toEqual(expect.arrayContaining(['auth', 'config', 'completion']));
    expect(complete(r.stdout, ['wxhooks', 'au'])).toEqual(['auth']);
    expect(complete(r.stdout, ['wxhooks', 'auth', ''])).toEqual(['status']);
    expect(complete(r.stdout, ['wxhooks', 'auth', 'status', '--js'])).toEqual(['--json']);
    expect(complete(r.stdout, ['wxhooks', '--verbose', 'config', 's'])).toEqual(['set']);
  });

  it('zsh and fish scripts are printed; an unknown shell is exit 2', async () => {
    const zsh = await runCli(['completion', 'zsh']);
    expect(zsh.stdout).toContain('#compdef wxhooks');
    const fish = await runCli(['completion', 'fish']);
    expect(fish.stdout).toContain("complete -c wxhooks -n '__fish_use_subcommand' -a 'auth'");
    expect(fish.stdout).toContain("-a 'status'");
    const bad = await runCli(['completion', 'powershell']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('bash, zsh or fish');
  });
});
