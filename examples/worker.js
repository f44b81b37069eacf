// A Cloudflare Worker (wrangler deploy, or workerd): the secrets are the Worker's secrets (wrangler secret put)
import { Webhooks, createWebHandler } from 'wxhooks/web';

/** @typedef {{ WX_WEBHOOK_SECRET: string, WX_WEBHOOK_SECRET_OLD?: string }} Env */

/** @type {((request: Request) => Promise<Response>) | undefined} */
let handle;
/** @param {Env} env */
function handler(env) {
  const webhooks = new Webhooks({ secrets: [env.WX_WEBHOOK_SECRET, env.WX_WEBHOOK_SECRET_OLD].filter((s) => s !== undefined) });
  webhooks.on('forecast_hour.available', async (event) => {
    const { model, initialization_time, forecast_hour } = event.payload.data;
    if (typeof forecast_hour !== 'number') throw new Error(`${event.id} has no forecast_hour`);
    console.log(`forecast ${model} ${initialization_time} +${forecast_hour}h ready (${event.id})`);
  });
  webhooks.onError((error) => console.error(`failed, the service will retry: ${error.message}`));
  return createWebHandler(webhooks, { path: '/webhooks' });
}

export default {
  /** @param {Request} request @param {Env} env */
  fetch(request, env) {
    handle ??= handler(env); // a Worker's env comes with its first request
    return handle(request);
  },
};
