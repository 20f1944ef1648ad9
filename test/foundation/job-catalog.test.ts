import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { catalogJob, JOBS, type JobData } from '../../src/queues.js';
import type { ProcessorDef } from '../../workers/host.js';
import { PROCESSORS, type Processors } from '../../workers/registry.js';

const config = { WEBHOOK_RETRY_DELAYS_MS: [0, 60_000, 300_000, 1_800_000, 7_200_000] };
const eventId = randomUUID();
const appId = randomUUID();
const deliveryId = randomUUID();

describe('the job catalog', () => {
  it('tags the webhook jobs an older release queued without a kind, keeping their job ids', () => {
    const old = [
      { data: { event_id: eventId, app_id: appId }, kind: 'first-attempts', id: `we-${eventId}` },
      { data: { events: [{ event_id: eventId, app_id: appId }] }, kind: 'first-attempts-safety-net', id: /^wb-/ },
      { data: { delivery_id: deliveryId, app_id: appId, run: 2, attempt_base: 1 }, kind: 'deliver', id: `wd-${deliveryId}-2` },
      { data: { task: 'log-retention' }, kind: 'log-retention', id: 'wh-log-retention' },
    ];
    for (const o of old) {
      const parsed = JOBS.webhook.schema.parse(o.data);
      expect(parsed.kind).toBe(o.kind);
      expect(JOBS.webhook.jobId(parsed)).toMatch(o.id);
      // The same job queued today (tagged) gets the same id, so a repeat across the upgrade is dropped.
      expect(JOBS.webhook.jobId(JOBS.webhook.schema.parse({ ...o.data, kind: o.kind }))).toBe(JOBS.webhook.jobId(parsed));
    }
  });

  it('refuses a webhook job of no known kind', () => {
    expect(JOBS.webhook.schema.safeParse({ kind: 'other', event_id: eventId, app_id: appId }).success).toBe(false);
    expect(JOBS.webhook.schema.safeParse({ app_id: appId }).success).toBe(false);
  });

  it('gives each webhook job the retry policy of its kind, a run the attempts left in WEBHOOK_RETRY_DELAYS_MS', () => {
    const first = catalogJob('webhook', { kind: 'first-attempts', event_id: eventId, app_id: appId }, {}, config);
    expect(first).toMatchObject({
      name: 'first-attempts',
      opts: { jobId: `we-${eventId}`, attempts: 8, backoff: { type: 'exponential' } },
    });
    const run = (attempt_base: number) =>
      catalogJob('webhook', { kind: 'deliver', delivery_id: deliveryId, app_id: appId, run: 1, attempt_base }, { delay: 5 }, config);
    expect(run(0).opts).toMatchObject({ jobId: `wd-${deliveryId}-1`, attempts: 5, backoff: { type: 'webhook' }, delay: 5 });
    expect(run(1).opts.attempts).toBe(4);
    expect(run(9).opts.attempts).toBe(1);
    // Queues whose policy does not depend on the job need no configuration.
    expect(catalogJob('send', { message_id: deliveryId, app_id: appId }).opts).toMatchObject({ jobId: `send-${deliveryId}`, attempts: 8 });
  });

  it("is compiled against: a webhook job needs the configuration, a processor gets its queue's data", () => {
    // @ts-expect-error the webhook queue's retry policy reads WEBHOOK_RETRY_DELAYS_MS
    expect(() => catalogJob('webhook', { kind: 'log-retention' })).toThrow(/configuration/);
    const typed: ProcessorDef<'send'> = {
      queue: 'send',
      create: () => async (job) => {
        const data: JobData<'send'> = job.data;
        // @ts-expect-error a send job has no event
        return data.event;
      },
    };
    expect(typed.queue).toBe('send');
  });
});

describe('the processor registry', () => {
  it('has a processor for every queue of the catalog, each for its own queue', () => {
    // @ts-expect-error a queue without a processor does not compile
    const incomplete: Processors = { ledger: PROCESSORS.ledger };
    // @ts-expect-error nor does a processor registered under another queue
    const crossed: Processors = { ...PROCESSORS, send: PROCESSORS.inbound };
    expect(Object.keys(incomplete)).toEqual(['ledger']);
    expect(crossed.send.queue).toBe('inbound');
    for (const [queue, def] of Object.entries(PROCESSORS)) expect(def.queue).toBe(queue);
    expect(Object.keys(PROCESSORS).sort()).toEqual(Object.keys(JOBS).sort());
  });
});
