import { readdirSync, readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { join, relative } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/project-root.js';
import { apiFetch } from '../helpers/openapi-contract.js';
import { createTestEnv, freePort, spawnService, type ChildService } from '../helpers/stack.js';

interface Export {
  path: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** A collector stand-in: records every OTLP request and answers as a collector does. */
async function startSink(): Promise<{ url: string; received: Export[]; server: Server }> {
  const received: Export[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, received, server };
}

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

describe('OTLP export', () => {
  it('sends a web process spans to OTEL_EXPORTER_OTLP_ENDPOINT/v1/traces as protobuf, with the configured headers', async () => {
    const sink = await startSink();
    cleanups.push(() => new Promise((resolve) => sink.server.close(resolve)));
    const t = await createTestEnv({ LOG_LEVEL: 'info' });
    cleanups.push(() => t.dropDatabase());
    const port = await freePort();
    const web: ChildService = spawnService('src/web.ts', {
      ...t.env,
      PORT: String(port),
      OTEL_EXPORTER_OTLP_ENDPOINT: `${sink.url}/`,
      OTEL_EXPORTER_OTLP_HEADERS: 'x-collector-key=k%3D1',
      OTEL_SERVICE_NAME: 'gateway-under-test',
    });
    cleanups.push(async () => {
      web.kill('SIGKILL');
      await web.exited;
    });
    await web.waitFor(/web listening/);
    // Unauthenticated: a 401, still a traced request of a known route.
    const res = await apiFetch(`http://127.0.0.1:${port}/v1/events`);
    expect(res.status).toBe(401);
    await fetch(`http://127.0.0.1:${port}/healthz`);
    // A graceful stop flushes what the batch processor holds.
    web.kill('SIGTERM');
    expect(await web.exited).toBe(0);

    const exports = sink.received.filter((r) => r.path === '/v1/traces');
    expect(exports.length).toBeGreaterThan(0);
    expect(exports[0].headers['content-type']).toBe('application/x-protobuf');
    expect(exports[0].headers['x-collector-key']).toBe('k=1');
    // Protobuf keeps strings as their UTF-8 bytes: the span and service names are readable in it.
    const body = Buffer.concat(exports.map((r) => r.body)).toString('latin1');
    expect(body).toContain('GET /v1/events');
    expect(body).toContain('gateway-under-test');
    expect(body).not.toContain('/healthz');
  });
});

describe('tracing off', () => {
  it('loads no OpenTelemetry module: only src/tracing/sdk.ts imports the SDK, and only dynamically', () => {
    const root = projectRoot();
    const files = (dir: string): string[] =>
      readdirSync(join(root, dir), { withFileTypes: true }).flatMap((d) =>
        d.isDirectory() ? files(join(dir, d.name)) : d.name.endsWith('.ts') ? [join(dir, d.name)] : [],
      );
    const importers = [...files('src'), ...files('workers')].flatMap((file) => {
      const text = readFileSync(join(root, file), 'utf8');
      const runtime = /^import (?!type )[^;]*from '(@opentelemetry\/[^']+|bullmq-otel)'/gm;
      const sdk = /^import [^;]*from '\.\/sdk\.js'|^import [^;]*from '[^']*tracing\/(sdk|postgres)\.js'/gm;
      return runtime.test(text) || sdk.test(text) ? [relative(root, join(root, file))] : [];
    });
    // sdk.ts imports postgres.ts; both are reached only through startTracing's `await import('./sdk.js')`.
    expect(importers.sort()).toEqual(['src/tracing/postgres.ts', 'src/tracing/sdk.ts']);
    expect(readFileSync(join(root, 'src/tracing/index.ts'), 'utf8')).toContain("await import('./sdk.js')");
  });
});
