// Small helpers the demo, the benchmarks and the tests share (plain JavaScript: the demo and the
// benchmarks run without a build step; the tests read the types in harness.d.ts).
import { createServer } from 'node:http';

/** A port on 127.0.0.1 that nothing listens on now: bound, then released. */
export async function freePort() {
  const s = createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

/** Calls `onLine` with each line a stream (a child's stdout) writes, without its newline. */
export function eachLine(stream, onLine) {
  let buffer = '';
  stream.setEncoding('utf8').on('data', (chunk) => {
    buffer += chunk;
    let nl;
    while ((nl = buffer.indexOf('\n')) !== -1) {
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      onLine(line);
    }
  });
}
