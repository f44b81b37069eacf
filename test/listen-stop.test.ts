import type { Command } from 'commander';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { buildProgram } from '../src/cli.js';
import type { ListenOptions } from '../src/commands/listen.js';
import { whenToStop, type Seen, type StopInput } from '../src/receiver/stop.js';
import type { HostPort } from '../src/util/parse.js';
import { testIo } from './helpers/context.js';

// When listen stops, as a function of its flags, what it counted and what happened: no sockets, no clock.

const accepted = (type = 'forecast_hour.available'): StopInput => ({ event: { outcome: 'accepted', type } });
const none: Seen = { accepted: 0 };

/** Feeds the inputs one after another; the stop of the last one, and what was counted. */
function run(o: Parameters<typeof whenToStop>[0], inputs: StopInput[]) {
  let seen = none;
  let stop: string | undefined;
  for (const input of inputs) {
    const step = whenToStop(o, seen, input);
    seen = step.seen;
    stop = step.stop;
    if (stop) break;
  }
  return { seen, stop };
}

describe('whenToStop', () => {
  it('no flag: listen goes on, whatever comes', () => {
    expect(run({}, [accepted(), { event: { outcome: 'duplicate', type: 'x' } }, { event: { outcome: 'unverified' } }])).toEqual({ seen: { accepted: 1 }, stop: undefined });
  });

  it('--exit-after N: after N verified new deliveries; duplicates and refused requests do not count', () => {
    const inputs: StopInput[] = [accepted(), { event: { outcome: 'duplicate', type: 'x' } }, { event: { outcome: 'forward_failed', type: 'x' } }, { event: { outcome: 'unverified' } }, accepted()];
    expect(run({ exitAfter: 2 }, inputs)).toEqual({ seen: { accepted: 2 }, stop: 'done' });
    expect(run({ exitAfter: 3 }, inputs).stop).toBeUndefined();
  });

  it('--until TYPE: the first verified delivery of that type, a duplicate of it too; never a refused one or another type', () => {
    const until = { until: 'initialization_time.available' };
    expect(run(until, [accepted('forecast_hour.available')]).stop).toBeUndefined();
    expect(run(until, [{ event: { outcome: 'unverified', type: 'initialization_time.available' } }]).stop).toBeUndefined();
    expect(run(until, [{ event: { outcome: 'forward_failed', type: 'initialization_time.available' } }]).stop).toBeUndefined();
    expect(run(until, [{ event: { outcome: 'duplicate', type: 'initialization_time.available' } }]).stop).toBe('done');
    expect(run(until, [accepted('initialization_time.available')]).stop).toBe('done');
  });

  it('--until-run: once the request completed the run', () => {
    const o = { untilRun: true as const };
    expect(run(o, [{ event: { outcome: 'accepted', type: 'forecast_hour.available' }, runComplete: false }]).stop).toBeUndefined();
    expect(run(o, [{ event: { outcome: 'accepted', type: 'forecast_hour.available' }, runComplete: true }]).stop).toBe('done');
  });

  it('--within running out: not complete (exit 9), for --until and --until-run alike', () => {
    expect(whenToStop({ until: 'degree_days.available', within: 1000 }, none, 'expired').stop).toBe('not_complete');
    expect(whenToStop({ untilRun: 'wm-6', within: 1000 }, none, 'expired').stop).toBe('not_complete');
    expect(whenToStop({}, none, 'expired').stop).toBeUndefined();
  });

  it('the processed pairs no longer writable: stop (exit 10), before anything else', () => {
    expect(run({ exitAfter: 1 }, [{ event: { outcome: 'store_failed', fatal: true } }])).toEqual({ seen: none, stop: 'storage_failed' });
  });
});

describe('ListenOptions, derived from the flag declarations', () => {
  it('has a field for every flag of listen, named as commander names it, and no other', async () => {
    const program = await buildProgram(['node', 'wxhooks', 'listen'], testIo());
    const listen = program.commands.find((c: Command) => c.name() === 'listen')!;
    const names = listen.options.map((o) => o.attributeName()).sort();
    // every key of the type, listed once here so that the compiler checks the list against the type, both ways
    const keys = {
      port: 1,
      host: 1,
      path: 1,
      relay: 1,
      webhook: 1,
      secretEnv: 1,
      scheme: 1,
      tolerance: 1,
      publicUrl: 1,
      subscribe: 1,
      clean: 1,
      check: 1,
      forwardTo: 1,
      forwardTimeout: 1,
      sink: 1,
      saveDir: 1,
      respondStatus: 1,
      dedupeTtl: 1,
      fsync: 1,
      store: 1,
      storeSchema: 1,
      claimTimeout: 1,
      exitAfter: 1,
      until: 1,
      untilRun: 1,
      expectHours: 1,
      initEvent: 1,
      within: 1,
      maxBody: 1,
      maxInflight: 1,
      readTimeout: 1,
      inspect: 1,
      inspectAllowRemote: 1,
      inspectHost: 1,
      history: 1,
      historySize: 1,
      watchRuns: 1,
      watchInterval: 1,
      lateAfter: 1,
      onLate: 1,
      watchModel: 1,
      metrics: 1,
    } satisfies Record<keyof ListenOptions, 1>;
    expectTypeOf<keyof typeof keys>().toEqualTypeOf<keyof ListenOptions>();
    expect(names).toEqual(Object.keys(keys).sort());
  });

  it('each field has the type its parser gives, required when the flag has a default', () => {
    expectTypeOf<ListenOptions['port']>().toEqualTypeOf<number>();
    expectTypeOf<ListenOptions['forwardTimeout']>().toEqualTypeOf<number>();
    expectTypeOf<ListenOptions['host']>().toEqualTypeOf<string>();
    expectTypeOf<ListenOptions['initEvent']>().toEqualTypeOf<boolean>();
    expectTypeOf<ListenOptions['exitAfter']>().toEqualTypeOf<number | undefined>();
    expectTypeOf<ListenOptions['untilRun']>().toEqualTypeOf<string | true | undefined>();
    expectTypeOf<ListenOptions['inspect']>().toEqualTypeOf<HostPort | undefined>();
    expectTypeOf<ListenOptions['subscribe']>().toEqualTypeOf<string[] | undefined>();
    expectTypeOf<ListenOptions['fsync']>().toEqualTypeOf<true | undefined>();
  });
});
