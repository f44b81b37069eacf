// A vitest reporter: at the end of a run, the ten slowest test files of each tier (project), each with
// its time from import to its last hook (what the tier's wall time is made of), and the sum per tier.
// `npx vitest run --reporter=default --reporter=./scripts/slowest-files.js` (docs/testing.md).
export default class SlowestFiles {
  onTestRunEnd(testModules) {
    const byProject = new Map();
    for (const m of testModules) {
      const d = m.diagnostic();
      // collecting (the file's imports) and running its tests and hooks
      const seconds = (d.collectDuration + d.duration) / 1000;
      const name = m.project.name || 'default';
      if (!byProject.has(name)) byProject.set(name, []);
      byProject.get(name).push({ file: m.relativeModuleId, seconds, tests: [...m.children.allTests()].length });
    }
    for (const [project, files] of byProject) {
      files.sort((a, b) => b.seconds - a.seconds);
      const total = files.reduce((s, f) => s + f.seconds, 0);
      process.stdout.write(`\nslowest files of ${project} (${files.length} files, ${total.toFixed(0)} s in all):\n`);
      for (const f of files.slice(0, 10)) process.stdout.write(`  ${f.seconds.toFixed(1).padStart(6)} s  ${String(f.tests).padStart(3)} tests  ${f.file}\n`);
    }
  }
}
