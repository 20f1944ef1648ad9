import { context, SpanKind, SpanStatusCode, trace, type Tracer } from '@opentelemetry/api';
import postgres from 'postgres';

/** The part of a postgres.js query object this reads and wraps (its class is not exported). */
interface QueryInternals {
  executed: boolean;
  strings: readonly string[] | string;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
  handle(): Promise<void>;
}

/** Statement text as sent, parameters as `$n`, cut to a length a trace backend keeps. */
function statementText(strings: readonly string[] | string): string {
  const text = typeof strings === 'string' ? strings : strings.reduce((all, part, i) => `${all}$${i}${part}`);
  return text.length > 2000 ? `${text.slice(0, 2000)}…` : text;
}

/**
 * A CLIENT span for each PostgreSQL statement run inside a traced operation. postgres.js has no
 * OpenTelemetry instrumentation and no query hook, so this wraps the one method every query runs
 * through when first awaited (`handle`, on the query class every pool shares; patches/ pins the
 * driver's version) and the settle functions of that query. Statements outside any span (a
 * listener, a pool's own checks) make none. Returns the undo.
 */
export function traceQueries(tracer: Tracer): () => void {
  // An unexecuted query of a pool that never connects: only its class is wanted.
  const proto = Object.getPrototypeOf(postgres({ max: 1 })`SELECT 1`) as QueryInternals;
  const handle = proto.handle;
  proto.handle = function (this: QueryInternals) {
    const parent = context.active();
    if (!this.executed && trace.getSpan(parent)) {
      const text = statementText(this.strings);
      const operation = /^\s*([A-Za-z]+)/.exec(text)?.[1]?.toUpperCase() ?? 'QUERY';
      const span = tracer.startSpan(
        operation,
        { kind: SpanKind.CLIENT, attributes: { 'db.system.name': 'postgresql', 'db.operation.name': operation, 'db.query.text': text } },
        parent,
      );
      const { resolve, reject } = this;
      this.resolve = (value) => {
        const rows = (value as { count?: unknown } | undefined)?.count;
        if (typeof rows === 'number') span.setAttribute('db.response.returned_rows', rows);
        span.end();
        resolve(value);
      };
      this.reject = (err) => {
        span.recordException(err as Error);
        span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error)?.message });
        span.end();
        reject(err);
      };
    }
    return handle.call(this);
  };
  return () => {
    proto.handle = handle;
  };
}
