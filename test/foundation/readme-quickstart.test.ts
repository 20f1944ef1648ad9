import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/project-root.js';
import { createTestEnv, freePort, spawnService, type ChildService, type TestEnv } from '../helpers/stack.js';

/**
 * README's quick start, run as written: its ```sh blocks under "## Quick start", in order.
 * Only what a reader substitutes is substituted — the ports (the service's and the webhook
 * receiver's, free ones here) and the `export` line, which is the one `npm start` printed.
 * `npm ci` is not rerun (the checkout is installed), and `npm start` is the same entry point
 * (`src/dev.ts`) started against this test's own database and Redis prefix.
 */
const readme = readFileSync(join(projectRoot(), 'README.md'), 'utf8');
const section = readme.split(/^## Quick start$/m)[1]?.split(/^## /m)[0] ?? '';
const blocks = [...section.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]);

let env: TestEnv | undefined;
let dev: ChildService | undefined;
afterAll(async () => {
  dev?.kill();
  await dev?.exited;
  await env?.dropDatabase();
});

describe("README's quick start", () => {
  it('starts, creates a sandbox connection, sends, replies as the user, and shows both on the stream and the webhook', async () => {
    expect(blocks.length).toBe(5);
    const [start, exported, ...rest] = blocks;
    expect(start.trim()).toBe('npm ci && npm start');
    expect(exported.trim()).toMatch(/^export GATEWAY=http:\/\/localhost:3000 APP_ID=<[^>]+> API_KEY=<[^>]+>$/);

    const port = await freePort();
    const hookPort = await freePort();
    env = await createTestEnv({ PORT: String(port), LOG_LEVEL: 'warn' });
    dev = spawnService('src/dev.ts', env.env);
    await dev.waitFor(/export GATEWAY=\S+ APP_ID=\S+ API_KEY=\S+/, 90_000);
    const printed = /export GATEWAY=\S+ APP_ID=\S+ API_KEY=\S+/.exec(dev.output())![0];
    expect(printed).toContain(`GATEWAY=http://localhost:${port} `);

    const script = [printed, ...rest].join('\n').replaceAll('4000', String(hookPort));
    const out = await new Promise<string>((resolve, reject) => {
      const bash = spawn('bash', ['-c', `${script}\nkill %1 2>/dev/null; wait`], {
        cwd: projectRoot(),
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let text = '';
      bash.stdout.on('data', (d: Buffer) => (text += d));
      bash.stderr.on('data', (d: Buffer) => (text += d));
      const timer = setTimeout(() => bash.kill('SIGKILL'), 60_000);
      bash.on('exit', () => {
        clearTimeout(timer);
        resolve(text);
      });
      bash.on('error', reject);
    });

    // The send: sent at once, under the sandbox's id.
    expect(out).toMatch(/"status":"sent","external_message_id":"sbx-[0-9a-f-]+"/);
    // The reply as the user: queued for the inbound worker.
    expect(out).toMatch(/\{"external_message_id":"in-[0-9a-f-]+","event_id":"[0-9a-f-]+"\}/);
    // The stream: both messages (SSE data is camelCase; the texts are in the payload).
    const frames = out.split('\n').filter((l) => l.startsWith('data:'));
    expect(frames.some((f) => f.includes('"eventType":"message.outbound"') && f.includes('Hello Ada'))).toBe(true);
    expect(frames.some((f) => f.includes('"eventType":"message.inbound"') && f.includes('Hi! Got it.'))).toBe(true);
    // The webhook receiver printed both, and the delivered report that came within the 5 s.
    expect(out).toContain('webhook: message.outbound "Hello Ada"');
    expect(out).toContain('webhook: message.inbound "Hi! Got it."');
    expect(out).toContain('webhook: message.status "delivered"');
  }, 180_000);
});
