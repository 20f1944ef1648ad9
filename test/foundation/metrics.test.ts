import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QUEUE_NAMES, queueFor } from '../../src/queues.js';
import { freePort, spawnService, startTestStack, type ChildService, type TestStack } from '../helpers/stack.js';

let s: TestStack;
let worker: ChildService | undefined;
beforeAll(async () => {
  s = await startTestStack({ workers: ['ledger'] });
});
afterAll(async () => {
  worker?.kill('SIGKILL');
  await s.close();
});

/** The value of the first sample named `name` whose labels include every one in `labels`. */
function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+)\{(.*)\} (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries([...m[2].matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) return Number(m[3]);
  }
  return undefined;
}

describe('GET /metrics', () => {
  it('serves Prometheus text with request durations by route and status, queue counts and job durations', async () => {
    const a = await s.createApp();
    expect((await s.request('POST', '/v1/events', { auth: a, body: { event_type: 'm.one', payload: {} } })).status).toBe(201);
    expect((await s.request('GET', '/v1/events?limit=abc', { auth: a })).status).toBe(400);
    await queueFor(s.deps.queues, 'webhook').add('webhook', { delivery_id: '00000000-0000-4000-8000-000000000001', app_id: a.appId });

    const r = await fetch(`${s.base}/metrics`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await r.text();

    expect(text).toContain('# TYPE http_request_duration_seconds histogram');
    expect(sample(text, 'http_request_duration_seconds_count', { method: 'POST', route: '/v1/events', status: '201' })).toBe(1);
    expect(sample(text, 'http_request_duration_seconds_count', { method: 'GET', route: '/v1/events', status: '400' })).toBe(1);
    // Unmatched paths share one label, so scanners cannot blow up the series count.
    await fetch(`${s.base}/no/such/${Date.now()}`);
    const again = await (await fetch(`${s.base}/metrics`)).text();
    expect(sample(again, 'http_request_duration_seconds_count', { route: 'unmatched', status: '404' })).toBe(1);

    for (const queue of QUEUE_NAMES) {
      for (const state of ['waiting', 'active', 'failed']) {
        expect(sample(text, 'queue_jobs', { queue, state }), `${queue} ${state}`).toEqual(expect.any(Number));
      }
    }
    expect(sample(text, 'queue_jobs', { queue: 'webhook', state: 'waiting' })).toBe(1);
    // The job's 'completed' event can trail the 201 (which follows the commit) by a moment.
    let jobs: number | undefined;
    for (const deadline = Date.now() + 5000; !jobs && Date.now() < deadline; await new Promise((res) => setTimeout(res, 50))) {
      jobs = sample(await (await fetch(`${s.base}/metrics`)).text(), 'job_duration_seconds_count', {
        queue: 'ledger',
        outcome: 'completed',
      });
    }
    expect(jobs).toBe(1);
  });

  it('is served by a worker-only process on WORKER_METRICS_PORT', async () => {
    const port = await freePort();
    worker = spawnService('workers/index.ts', { ...s.env, WORKER_QUEUES: 'ledger', WORKER_METRICS_PORT: String(port), LOG_LEVEL: 'info' });
    await worker.waitFor(/workers started/);
    const deadline = Date.now() + 10_000;
    let text = '';
    while (!text && Date.now() < deadline) {
      text = await fetch(`http://127.0.0.1:${port}/metrics`).then(
        (r) => r.text(),
        () => '',
      );
      if (!text) await new Promise((res) => setTimeout(res, 50));
    }
    expect(sample(text, 'queue_jobs', { queue: 'ledger', state: 'waiting' })).toEqual(expect.any(Number));
    expect(text).toContain('# TYPE job_duration_seconds histogram');
  });
});
