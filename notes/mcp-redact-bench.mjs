// node redact-bench.mjs OLD_DIST NEW_DIST: redact() of the base (exact values) and of this branch (their forms too), same run
const [oldDist, newDist] = process.argv.slice(2);
const old = await import(`${oldDist}/util/redact.js`);
const neu = await import(`${newDist}/util/redact.js`);
const key = Buffer.alloc(32).map((_, i) => (i * 37 + 11) & 255);
const values = [`whsec_${Buffer.from(key).toString('base64')}`, `wb_${Buffer.from('acme:0123456789abcdef0123456789abcdef').toString('base64')}`, '0123456789abcdef0123456789abcdef', `tok_${'q'.repeat(32)}`];
for (const v of values) (old.addSensitive(v), neu.addSensitive(v));
const line = '{"time":"2026-11-28T01:53:16.123Z","event":"delivery","outcome":"accepted","status":200,"type":"forecast_hour.available","trigger_id":"trg_00mwzraf7i6903f68e443b51d7","subscription_id":"1","webhook_id":"1","model":"wm-6","channel":"wh-7f3a9c0b1d2e"}';
const body = JSON.stringify({ data: { response: Array.from({ length: 200 }, (_, i) => ({ lat: i, lon: -i, t2m: 280 + i / 10 })) } }).slice(0, 16384);
const time = (f, text, n) => { for (let i = 0; i < n / 10; i++) f(text); const t = process.hrtime.bigint(); for (let i = 0; i < n; i++) f(text); return Number(process.hrtime.bigint() - t) / n / 1000; };
for (let round = 0; round < 3; round++) {
  console.log(`round ${round + 1}: a ${line.length}-char line: base ${time(old.redact, line, 20000).toFixed(2)} us, branch ${time(neu.redact, line, 20000).toFixed(2)} us; a ${body.length}-byte body: base ${time(old.redact, body, 500).toFixed(1)} us, branch ${time(neu.redact, body, 500).toFixed(1)} us`);
}
