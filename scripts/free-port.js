import { createServer } from 'node:http';

/** A port on 127.0.0.1 that nothing listens on now: bound, then released. */
export async function freePort() {
  const s = createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}
