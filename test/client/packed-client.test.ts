import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/project-root.js';
import { type AppCredentials, startTestStack, type TestStack } from '../helpers/stack.js';

/**
 * The typed client as someone outside the repository gets it: `npm pack` (which builds it by
 * its `prepare`), the tarball installed into a scratch project in the temp folder (its
 * dependencies from the registry), a TypeScript file importing it type-checked with tsc, then
 * run against this test's service.
 */

const run = promisify(execFile);
const require = createRequire(import.meta.url);
const TSC = require.resolve('typescript/bin/tsc');
const CLIENT_DIR = join(projectRoot(), 'clients', 'typescript');

let s: TestStack;
let app: AppCredentials;
let scratch: string;

beforeAll(async () => {
  s = await startTestStack();
  app = await s.createApp();
  scratch = mkdtempSync(join(tmpdir(), 'packed-client-'));
});
afterAll(async () => {
  if (scratch) rmSync(scratch, { recursive: true, force: true });
  await s?.close();
});

const USER_CODE = `import { createGatewayClient, verifyWebhook, WebhookVerificationError, type WebhookDelivery } from '@messaging-gateway/client';

const [baseUrl, apiKey, appId] = process.argv.slice(2);
const gateway = createGatewayClient({ baseUrl, apiKey, appId });

const event = await gateway.createEvent({ event_type: 'packed.client', payload: { n: 1 } }, { idempotencyKey: 'packed-1' });
const { data } = await gateway.rest.GET('/v1/events/{id}', { params: { path: { id: event.id } } });
const listed: string[] = [];
for await (const e of gateway.paginate('/v1/events', { query: { event_type: 'packed.*' } })) listed.push(e.id);
const gql = await gateway.graphql.query<{ events: { edges: { node: { eventType: string } }[] } }>('{ events(first: 1) { edges { node { eventType } } } }');

// Never called: the body is typed from the OpenAPI document, so a misspelt field does not compile.
const misspelt = () =>
  // @ts-expect-error event_typ is not a field of the request body
  gateway.createEvent({ event_typ: 'packed.client', payload: {} });
void misspelt;

let refused = '';
try {
  const delivery: WebhookDelivery = verifyWebhook('{}', {}, 'a-secret');
  console.log(delivery.event_id);
} catch (err) {
  if (err instanceof WebhookVerificationError) refused = err.message;
}
console.log(JSON.stringify({ created: event.id, fetched: data?.id, listed, gql: gql.data?.events.edges[0]?.node.eventType, refused }));
`;

describe('the packed TypeScript client', () => {
  it('packs, installs into a project outside the repository, type-checks and talks to the service', { timeout: 300_000 }, async () => {
    const packed = await run('npm', ['pack', '--json', '--pack-destination', scratch], { cwd: CLIENT_DIR, maxBuffer: 16 << 20 });
    const [{ filename, files }] = JSON.parse(packed.stdout) as { filename: string; files: { path: string }[] }[];
    expect(files.map((f) => f.path)).toEqual(expect.arrayContaining(['dist/index.js', 'dist/index.d.ts', 'package.json']));
    expect(readdirSync(scratch)).toContain(filename);

    writeFileSync(join(scratch, 'package.json'), JSON.stringify({ name: 'scratch', private: true, type: 'module' }));
    // The tarball's dependencies come from the registry (the cache first); @types/node for Buffer and process.
    await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', join(scratch, filename), '@types/node@20'], {
      cwd: scratch,
      maxBuffer: 16 << 20,
    });
    writeFileSync(join(scratch, 'main.ts'), USER_CODE);
    writeFileSync(
      join(scratch, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          lib: ['ES2022', 'DOM'],
          outDir: 'out',
        },
        files: ['main.ts'],
      }),
    );
    await run(process.execPath, [TSC, '-p', scratch], { cwd: scratch }).catch((err: { stdout: string }) => {
      throw new Error(`tsc failed in the scratch project:\n${err.stdout}`);
    });

    const out = await run(process.execPath, [join(scratch, 'out', 'main.js'), s.base, app.apiKey, app.appId], { cwd: scratch });
    const result = JSON.parse(out.stdout.trim().split('\n').at(-1)!);
    expect(result.fetched).toBe(result.created);
    expect(result.listed).toEqual([result.created]);
    expect(result.gql).toBe('packed.client');
    expect(result.refused).toMatch(/Missing X-Service-Signature/);
  });
});
