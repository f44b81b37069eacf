// The floor for `auth status`: a bare Node script making the same request and printing the answer.
import { get } from 'node:http';

const [url, key] = process.argv.slice(2);
get(`${url}/debug/v1/auth_status`, { headers: { authorization: `Bearer ${key}` } }, (res) => {
  let text = '';
  res.setEncoding('utf8').on('data', (d) => (text += d));
  res.on('end', () => {
    const status = JSON.parse(text);
    process.stdout.write(`${status.authed ? 'ok' : 'no'} ${status.client_id}\n`);
    process.exit(status.authed ? 0 : 3);
  });
});
