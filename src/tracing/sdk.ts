/**
 * The OpenTelemetry SDK of a process that traces: imported only by startTracing (./index.ts)
 * when OTEL_EXPORTER_OTLP_ENDPOINT is set, so a process that does not trace never loads it.
 */
import { createRequire } from 'node:module';
import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Link,
  type SpanContext,
} from '@opentelemetry/api';
import { getRPCMetadata, RPCType } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { IORedisInstrumentation } from '@opentelemetry/instrumentation-ioredis';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  SamplingDecision,
  SimpleSpanProcessor,
  TraceIdRatioBasedSampler,
  type Sampler,
  type SamplingResult,
} from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { BullMQOtel } from 'bullmq-otel';
import { traceQueries } from './postgres.js';
import type { SpanAttributes, SpanKindName, Tracing, TracingConfig, TracingOptions } from './index.js';

const TRACER = 'messaging-gateway';

/** Requests no one follows: probes and scrapes would bury the traces worth reading. */
const UNTRACED_PATHS = new Set(['/healthz', '/readyz', '/metrics']);

/**
 * BullMQ's own upkeep, traced by it outside any job: a worker's fetch loop, lock renewals, the
 * stalled-job check. Each would be a trace of its own every few seconds per queue, so these
 * are dropped when they start a trace (never inside one: then they belong to its job).
 */
const BULLMQ_UPKEEP = new Set([
  'getNextJob',
  'extendLocks',
  'moveStalledJobsToWait',
  'startStalledCheckTimer',
  'rateLimit',
  'close',
  'pause',
  'resume',
  'trimEvents',
]);

class WithoutUpkeep implements Sampler {
  constructor(private readonly inner: Sampler) {}
  shouldSample(ctx: Context, traceId: string, name: string, kind: SpanKind, attributes: Attributes, links: Link[]): SamplingResult {
    if (kind === SpanKind.INTERNAL && !trace.getSpanContext(ctx) && BULLMQ_UPKEEP.has(name.split(' ', 1)[0]))
      return { decision: SamplingDecision.NOT_RECORD };
    return this.inner.shouldSample(ctx, traceId, name, kind, attributes, links);
  }
  toString(): string {
    return `WithoutUpkeep{${this.inner.toString()}}`;
  }
}

/** OTEL_TRACES_SAMPLER as OpenTelemetry defines its names. */
function samplerOf(config: TracingConfig): Sampler {
  const ratio = new TraceIdRatioBasedSampler(config.OTEL_TRACES_SAMPLER_ARG);
  const inner: Record<TracingConfig['OTEL_TRACES_SAMPLER'], Sampler> = {
    always_on: new AlwaysOnSampler(),
    always_off: new AlwaysOffSampler(),
    traceidratio: ratio,
    parentbased_always_on: new ParentBasedSampler({ root: new AlwaysOnSampler() }),
    parentbased_always_off: new ParentBasedSampler({ root: new AlwaysOffSampler() }),
    parentbased_traceidratio: new ParentBasedSampler({ root: ratio }),
  };
  return new WithoutUpkeep(inner[config.OTEL_TRACES_SAMPLER]);
}

const KINDS: Record<SpanKindName, SpanKind> = {
  internal: SpanKind.INTERNAL,
  producer: SpanKind.PRODUCER,
  consumer: SpanKind.CONSUMER,
  client: SpanKind.CLIENT,
};

/** The span context a `traceparent` names, or undefined when it is missing or malformed. */
function spanContextOf(traceparent: string | undefined): SpanContext | undefined {
  if (!traceparent) return undefined;
  return trace.getSpanContext(propagation.extract(ROOT_CONTEXT, { traceparent }));
}

const cleanAttributes = (a: SpanAttributes | undefined): Attributes =>
  Object.fromEntries(Object.entries(a ?? {}).filter(([, v]) => v !== undefined)) as Attributes;

export function startSdk(config: TracingConfig, options: TracingOptions): Tracing {
  const exporter =
    options.exporter ??
    new OTLPTraceExporter({
      url: `${config.OTEL_EXPORTER_OTLP_ENDPOINT!.replace(/\/+$/, '')}/v1/traces`,
      headers: config.OTEL_EXPORTER_OTLP_HEADERS,
    });
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': config.OTEL_SERVICE_NAME, 'gateway.role': options.role }),
    sampler: samplerOf(config),
    // A test's exporter sees each span as it ends; the OTLP exporter gets batches in the background.
    spanProcessors: [options.exporter ? new SimpleSpanProcessor(exporter) : new BatchSpanProcessor(exporter)],
  });
  // The AsyncLocalStorage context manager and the W3C traceparent/baggage propagators.
  provider.register();
  const instrumentations = [
    new HttpInstrumentation({
      ignoreIncomingRequestHook: (req) => UNTRACED_PATHS.has((req.url ?? '').split('?', 1)[0]),
      requireParentforOutgoingSpans: true,
    }),
    // Every outbound call (webhooks, platforms, media, transcription) goes through undici, whose
    // diagnostics channels this reads; it also adds the `traceparent` header to each.
    new UndiciInstrumentation({ requireParentforSpans: true }),
    new IORedisInstrumentation({ requireParentSpan: true }),
  ];
  // Each is enabled as it is made (its require hook set, the undici channels subscribed).
  for (const instrumentation of instrumentations) instrumentation.setTracerProvider(provider);
  // The process imported ioredis and node:http before tracing started (ES modules load first).
  // Both patches go on prototypes (Redis#sendCommand, Server#emit), so requiring the modules
  // again through the hooks the instrumentations set patches the classes already in use.
  const require = createRequire(import.meta.url);
  require('node:http');
  require('ioredis');
  const tracer = provider.getTracer(TRACER);
  const untraceQueries = traceQueries(tracer);

  return {
    bullmq: new BullMQOtel(TRACER),
    async span(name, opts, fn) {
      const active = context.active();
      const carried = spanContextOf(opts.parent);
      const parent = carried ? trace.setSpanContext(active, carried) : active;
      const here = trace.getSpanContext(active);
      const links: Link[] = [
        ...(opts.links?.flatMap((tp) => {
          const sc = spanContextOf(tp);
          return sc ? [{ context: sc }] : [];
        }) ?? []),
        // Re-parented onto carried work: the operation it ran inside is linked instead.
        ...(carried && here && here.spanId !== carried.spanId ? [{ context: here }] : []),
      ];
      const span = tracer.startSpan(
        name,
        { kind: KINDS[opts.kind ?? 'internal'], attributes: cleanAttributes(opts.attributes), links },
        parent,
      );
      return context.with(trace.setSpan(parent, span), async () => {
        try {
          return await fn({
            setAttributes: (a) => span.setAttributes(cleanAttributes(a)),
            fail: (message) => span.setStatus({ code: SpanStatusCode.ERROR, message }),
          });
        } catch (err) {
          span.recordException(err as Error);
          span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error)?.message });
          throw err;
        } finally {
          span.end();
        }
      });
    },
    traceparent() {
      const carrier: { traceparent?: string } = {};
      propagation.inject(context.active(), carrier);
      return carrier.traceparent;
    },
    routeMatched(method, route) {
      // The HTTP instrumentation names its span from this when the request ends.
      const rpc = getRPCMetadata(context.active());
      if (rpc?.type === RPCType.HTTP) rpc.route = route;
      trace.getActiveSpan()?.updateName(`${method} ${route}`);
    },
    async shutdown() {
      for (const instrumentation of instrumentations) instrumentation.disable();
      untraceQueries();
      await provider.shutdown();
      trace.disable();
      context.disable();
      propagation.disable();
    },
  };
}
