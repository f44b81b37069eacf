#!/usr/bin/env node
// The entry point: the built CLI, nothing else. In a clone that is not built (or not installed), say what
// to run rather than print Node's stack for a module it cannot find.
let cli;
try {
  cli = await import('../dist/bin/cli.js');
} catch (err) {
  if (err?.code !== 'ERR_MODULE_NOT_FOUND') throw err;
  const root = new URL('..', import.meta.url).pathname;
  // the CLI itself missing (not built), or a package it imports (not installed)
  const built = !/Cannot find module '[^']*\/dist\/bin\/cli\.js'/.test(String(err.message));
  process.stderr.write(
    built
      ? `wxhooks cannot start: its dependencies are not installed in ${root} (${String(err.message).split('\n')[0]}).\nRun \`npm ci\` there, then try again.\n`
      : `wxhooks is not built in ${root}: dist/ is missing.\nRun \`npm ci && npm run build\` there (or \`npm run build\`, if npm ci has run), then try again.\n`,
  );
  process.exit(1);
}
await cli.run();
