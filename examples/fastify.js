// Fastify 5 (Node): node examples/fastify.js
import Fastify from 'fastify';
import { Webhooks } from 'wxhooks';

const webhooks = new Webhooks({
  secrets: [process.env.WX_WEBHOOK_SECRET, process.env.WX_WEBHOOK_SECRET_OLD].filter((s) => s !== undefined),
});

webhooks.on('forecast_hour.available', async (event) => {
  const { model, initialization_time, forecast_hour } = event.payload.data;
  if (typeof forecast_hour !== 'number') throw new Error(`${event.id} has no forecast_hour`);
  console.log(`forecast ${model} ${initialization_time} +${forecast_hour}h ready (${event.id})`);
});
webhooks.onError((error) => console.error(`failed, the service will retry: ${error.message}`));

const app = Fastify();
// in a plugin of its own, the body is read as the raw bytes that were signed; the app's other routes keep their parsers
app.register(async (hooks) => {
  hooks.removeAllContentTypeParsers();
  hooks.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
  hooks.post('/webhooks', async (request, reply) => {
    const receipt = await webhooks.verifyAndReceive({ headers: request.headers, body: /** @type {Buffer} */ (request.body) });
    return reply.code(receipt.status).headers({ 'content-type': 'application/json', ...receipt.headers }).send(receipt.body);
  });
});
app.get('/health', async () => 'ok');
await app.listen({ port: Number(process.env.PORT ?? 3000), host: '127.0.0.1' });
