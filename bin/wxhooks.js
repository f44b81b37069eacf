#!/usr/bin/env node
// The entry point: the built CLI, nothing else. CommonJS (bin/package.json says so) for one reason:
// `wxhooks --version` answers here, from package.json, before any ES module loads. Node's ES module loader
// alone costs a start-up about 7% of `node -e 0` (1.13× against 1.06× for the same line printed by a
// CommonJS file; the whole CLI's fast path measured 1.24×, this one 1.08×: farm-bench -n 40, 2026-11-28).
const args = process.argv.slice(2);
if (args.length === 1 && (args[0] === '--version' || args[0] === '-V')) {
  process.stdout.write(`${require('../package.json').version}\n`);
} else {
  import('../dist/bin/cli.js').then((cli) => cli.run(), notStarted);
}

// In a clone that is not built (or not installed), say what to run rather than print Node's stack for a
// module it cannot find.
function notStarted(err) {
  if (err?.code !== 'ERR_MODULE_NOT_FOUND') throw err;
  const root = require('node:path').resolve(__dirname, '..');
  // the CLI itself missing (not built), or a package it imports (not installed)
  const built = !/Cannot find module '[^']*\/dist\/bin\/cli\.js'/.test(String(err.message));
  process.stderr.write(
    built
      ? `wxhooks cannot start: its dependencies are not installed in ${root} (${String(err.message).split('\n')[0]}).\nRun \`npm ci\` there, then try again.\n`
      : `wxhooks is not built in ${root}: dist/ is missing.\nRun \`npm ci && npm run build\` there (or \`npm run build\`, if npm ci has run), then try again.\n`,
  );
  process.exitCode = 1;
}
