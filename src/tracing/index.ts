import type { SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { Telemetry } from 'bullmq';
import type { Config } from '../config.js';

/** What a span is to its neighbours (OpenTelemetry's span kinds). */
export type SpanKindName = 'internal' | 'producer' | 'consumer' | 'client';

export type SpanAttributes = Record<string, string | number | boolean | string[] | undefined>;

export interface SpanOptions {
  kind?: SpanKindName;
  attributes?: SpanAttributes;
  /**
   * A W3C `traceparent` carried with the work (in a job, beside an event) to parent the span
   * on instead of the active span; the active span, when there is one, is then linked.
   */
  parent?: string;
  /** Other operations this one serves (the requests of a group commit), as `traceparent`s. */
  links?: (string | undefined)[];
}

/** The span a `Tracing.span` callback runs in. */
export interface ActiveSpan {
  setAttributes(attributes: SpanAttributes): void;
  /** Marks the span as failed (an answer that is an error but no exception). */
  fail(message: string): void;
}

/**
 * Tracing of a process where OTEL_EXPORTER_OTLP_ENDPOINT is set (src/tracing/sdk.ts); where it
 * is not, `Deps.tracing` is undefined and every seam skips its tracing with one check, so a
 * process without it loads no OpenTelemetry module at all.
 */
export interface Tracing {
  /** BullMQ's telemetry (bullmq-otel): producer and consumer spans, the context in each job's options. */
  readonly bullmq: Telemetry;
  /** Runs `fn` in a new span, ended (and marked failed on a throw) when it settles. */
  span<T>(name: string, options: SpanOptions, fn: (span: ActiveSpan) => Promise<T>): Promise<T>;
  /** The active span's W3C `traceparent`, to carry with work that leaves this call stack. */
  traceparent(): string | undefined;
  /** Names the active HTTP server span after the route that matched (`POST /v1/events`). */
  routeMatched(method: string, route: string): void;
  /** Flushes what is buffered, stops exporting and removes every patch (a test's cleanup). */
  shutdown(): Promise<void>;
}

export type TracingConfig = Pick<
  Config,
  'OTEL_EXPORTER_OTLP_ENDPOINT' | 'OTEL_EXPORTER_OTLP_HEADERS' | 'OTEL_SERVICE_NAME' | 'OTEL_TRACES_SAMPLER' | 'OTEL_TRACES_SAMPLER_ARG'
>;

export interface TracingOptions {
  /** Which process this is, exported as the `gateway.role` resource attribute. */
  role: 'web' | 'worker' | 'all';
  /** Where spans go instead of the OTLP exporter, one at a time (a test's in-memory exporter). */
  exporter?: SpanExporter;
}

/**
 * Starts tracing when OTEL_EXPORTER_OTLP_ENDPOINT is set (or a test hands an exporter), before
 * the process opens its connections; undefined otherwise. The SDK is imported only then.
 */
export async function startTracing(config: TracingConfig, options: TracingOptions): Promise<Tracing | undefined> {
  if (!config.OTEL_EXPORTER_OTLP_ENDPOINT && !options.exporter) return undefined;
  const { startSdk } = await import('./sdk.js');
  return startSdk(config, options);
}
