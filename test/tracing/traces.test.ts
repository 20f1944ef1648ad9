import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.js';
import { startTracing, type Tracing } from '../../src/tracing/index.js';
import type { AppCredentials, TestStack } from '../helpers/stack.js';
import type { Receiver } from '../webhooks/receiver.js';
import { subscribedStack, type Subscribed } from '../webhooks/subscribed.js';

const exporter = new InMemorySpanExporter();
let tracing: Tracing;
let w: Subscribed;
let s: TestStack;
let a: AppCredentials;
let rx: Receiver;

beforeAll(async () => {
  // Tracing as a process with OTEL_EXPORTER_OTLP_ENDPOINT set starts it, spans kept in memory.
  tracing = (await startTracing(parseConfig({ NODE_ENV: 'test' }), { role: 'all', exporter }))!;
  w = await subscribedStack('traced.*', { tracing });
  ({ s, app: a, rx } = w);
});
afterAll(async () => {
  // Shuts tracing down too (closeDeps): the patches come off before the next file in this process.
  await w?.close();
});

const spanId = (span: ReadableSpan) => span.spanContext().spanId;
const traceId = (span: ReadableSpan) => span.spanContext().traceId;

/** The spans of one trace once every span's parent has ended too (a connected tree), or undefined. */
function connectedTrace(id: string, mustHave: string[]): ReadableSpan[] | undefined {
  const spans = exporter.getFinishedSpans().filter((span) => traceId(span) === id);
  const ids = new Set(spans.map(spanId));
  const roots = spans.filter((span) => !span.parentSpanContext || !ids.has(span.parentSpanContext.spanId));
  if (roots.length !== 1 || mustHave.some((name) => !spans.some((span) => span.name === name))) return undefined;
  return spans;
}

async function until<T>(what: string, probe: () => T | undefined, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const got = probe();
    if (got !== undefined) return got;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('traces from request to delivery', () => {
  it('makes one POST /v1/events with a matching subscription one connected trace, commit and delivery in it', async () => {
    const created = await s.request('POST', '/v1/events', { auth: a, body: { event_type: 'traced.hello', payload: { n: 1 } } });
    expect(created.status).toBe(201);
    const eventId = created.json.id as string;
    const [delivery] = await rx.waitFor(1, (r) => r.json?.event_id === eventId);

    // The receiver got a W3C traceparent: version 00, a trace id, the calling span's id, sampled.
    const traceparent = delivery.headers.traceparent as string;
    expect(traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    const [, id, parentSpan] = traceparent.split('-');

    const spans = await until('the request trace to be complete', () =>
      connectedTrace(id, ['POST /v1/events', 'ledger commit', 'webhook attempt', 'process ledger']),
    );
    const named = (name: string) => spans.filter((span) => span.name === name);
    const [root] = spans.filter((span) => !span.parentSpanContext);
    expect(root.name).toBe('POST /v1/events');
    expect(root.attributes['http.route']).toBe('/v1/events');

    // The enqueue and the ledger job (bullmq-otel), the commit under that job.
    const [add] = spans.filter((span) => span.name.startsWith('add ledger'));
    const [job] = named('process ledger');
    const [commit] = named('ledger commit');
    expect(add.parentSpanContext?.spanId).toBe(spanId(root));
    expect(job.parentSpanContext?.spanId).toBe(spanId(add));
    expect(commit.parentSpanContext?.spanId).toBe(spanId(job));
    expect(commit.attributes['gateway.event_ids']).toEqual([eventId]);
    // The commit's statements, from the seam on postgres.js.
    const inCommit = spans.filter((span) => span.parentSpanContext?.spanId === spanId(commit) && span.attributes['db.system.name']);
    expect(inCommit.map((span) => span.name)).toEqual(expect.arrayContaining(['BEGIN', 'COMMIT']));

    // The delivery, under the event's request and linked to the commit it follows.
    const [first] = named('webhook first-attempts');
    expect(first.parentSpanContext?.spanId).toBe(spanId(root));
    expect(first.links.map((l) => l.context.spanId)).toContain(spanId(commit));
    const [attempt] = named('webhook attempt');
    expect(attempt.parentSpanContext?.spanId).toBe(spanId(first));
    expect(attempt.attributes).toMatchObject({
      'gateway.event_id': eventId,
      'gateway.webhook.outcome': 'delivered',
      'http.response.status_code': 200,
    });
    // The outbound POST (undici instrumentation) is the span the receiver's traceparent names.
    const post = spans.find((span) => spanId(span) === parentSpan)!;
    expect(post.parentSpanContext?.spanId).toBe(spanId(attempt));
    expect(post.attributes['http.request.method']).toBe('POST');

    // Redis from the ioredis instrumentation, inside the trace.
    expect(spans.some((span) => span.attributes['db.system'] === 'redis' || span.attributes['db.system.name'] === 'redis')).toBe(true);
  });

  it('links a group commit to every request it serves', async () => {
    exporter.reset();
    const results = await Promise.all(
      [1, 2, 3].map((n) => s.request('POST', '/v1/events', { auth: a, body: { event_type: 'traced.batch', payload: { n } } })),
    );
    const ids = results.map((r) => {
      expect(r.status).toBe(201);
      return r.json.id as string;
    });
    const requests = await until('three request spans', () => {
      const got = exporter.getFinishedSpans().filter((span) => span.name === 'POST /v1/events');
      return got.length === 3 ? got : undefined;
    });
    const commits = await until('commits of all three events', () => {
      const got = exporter.getFinishedSpans().filter((span) => span.name === 'ledger commit');
      const committed = new Set(got.flatMap((c) => c.attributes['gateway.event_ids'] as string[]));
      return ids.every((id) => committed.has(id)) ? got : undefined;
    });
    // However the three were batched, each request's trace holds its commit or is linked from it.
    for (const request of requests) {
      const served = commits.some((c) => traceId(c) === traceId(request) || c.links.some((l) => l.context.spanId === spanId(request)));
      expect(served).toBe(true);
    }
  });
});
