import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '../../scripts/harness.js';
import { tempDir } from './cli.js';

/** Debian's Prometheus on the PATH (apt-get install prometheus; test/global-setup.ts checks it), or PROMETHEUS_BIN. */
export const PROMETHEUS = process.env.PROMETHEUS_BIN ?? 'prometheus';

/** A throwaway Prometheus server on 127.0.0.1, scraping `targets` every second, its data in a folder of its own. */
export interface Prometheus {
  url: string;
  /** An instant query's result: each series' labels and value. */
  query(q: string): Promise<{ metric: Record<string, string>; value: number }[]>;
  /** Resolves with a query's result once `match` accepts it (each scrape is a second apart: asked again until then, within 60 s). */
  until(q: string, match: (r: { metric: Record<string, string>; value: number }[]) => boolean): Promise<{ metric: Record<string, string>; value: number }[]>;
  stop(): Promise<void>;
}

export async function startPrometheus(targets: { job: string; target: string }[]): Promise<Prometheus> {
  const dir = tempDir('wxhooks-prometheus-');
  const port = await freePort();
  const jobs = targets.map((t) => `  - job_name: ${t.job}\n    scrape_interval: 1s\n    scrape_timeout: 1s\n    static_configs:\n      - targets: ['${t.target}']`).join('\n');
  writeFileSync(join(dir, 'prometheus.yml'), `global:\n  scrape_interval: 1s\nscrape_configs:\n${jobs}\n`);
  const child: ChildProcess = spawn(
    PROMETHEUS,
    [`--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`, '--storage.tsdb.retention.time=1h'],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let log = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (log += d));
  const exited = new Promise<void>((resolve) => child.on('close', () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  // ready once it says so in its log (a line, not a poll of the clock)
  await new Promise<void>((resolve, reject) => {
    const look = () => {
      if (log.includes('Server is ready to receive web requests')) return resolve();
      if (child.exitCode !== null) return reject(new Error(`prometheus exited: ${log}`));
    };
    child.stderr!.on('data', look);
    child.on('close', look);
    look();
  });
  const query = async (q: string) => {
    const res = await fetch(`${url}/api/v1/query?query=${encodeURIComponent(q)}`);
    const doc = (await res.json()) as { status: string; data: { result: { metric: Record<string, string>; value: [number, string] }[] } };
    if (doc.status !== 'success') throw new Error(`query ${q}: ${JSON.stringify(doc)}`);
    return doc.data.result.map((r) => ({ metric: r.metric, value: Number(r.value[1]) }));
  };
  return {
    url,
    query,
    async until(q, match) {
      const deadline = Date.now() + 60_000;
      for (;;) {
        const r = await query(q);
        if (match(r)) return r;
        if (Date.now() > deadline) throw new Error(`Prometheus never answered ${q} as expected: ${JSON.stringify(r)}`);
        // the next scrape is a second away: ask again when it may have come
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    },
    async stop() {
      child.kill('SIGTERM');
      await exited;
    },
  };
}
