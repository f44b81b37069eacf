import type { Command } from 'commander';
import { buildProgram, GROUPS, type Io } from './cli.js';

/**
 * Every command's help, as commander renders it (80 columns): written at build time into
 * dist/bin/help.json by scripts/bundle.js, so that `wxhooks [group [command]] --help` needs no
 * commander at run time (−16 ms of a 102 ms floor, measured). Not part of the binary's run.
 */
export async function renderAllHelp(): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  let text = '';
  const io: Io = {
    env: {},
    stdout: { write: (t) => (text += String(t)) },
    stderr: { write: () => undefined },
    stdin: process.stdin,
    interrupted: new Promise(() => undefined),
  };
  const render = async (path: string[]) => {
    const program = await buildProgram(['node', 'wxhooks', ...path, '--help'], io);
    let cmd: Command = program;
    for (const name of path) cmd = cmd.commands.find((c) => c.name() === name)!;
    for (const c of [program, ...program.commands, ...program.commands.flatMap((g) => g.commands)]) {
      c.configureOutput({ writeOut: (t) => (text += t), getOutHelpWidth: () => 80 });
    }
    text = '';
    cmd.outputHelp();
    out[path.join(' ')] = text;
    return cmd;
  };
  await render([]);
  for (const [name] of GROUPS) {
    const group = await render([name]);
    for (const sub of group.commands) await render([name, sub.name()]);
  }
  return out;
}
