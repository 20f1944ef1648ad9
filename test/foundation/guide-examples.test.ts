import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_STATUS } from '../../src/errors.js';
import { projectRoot } from '../../src/project-root.js';
import { createTestEnv, freePort, spawnService, type ChildService, type TestEnv } from '../helpers/stack.js';

/**
 * docs/guide.md promises that its commands work as written, in order, in one shell, against
 * `npm start`. This runs them so: the service is src/dev.ts (what `npm start` runs) on a fresh
 * database, the app id and key are the ones it prints, and the guide's `sh` blocks run in one
 * bash with `set -euo pipefail` — a command that fails fails the test. An HTML comment before a
 * block says what it is: `guide:setup` (the three variables, set here to this service),
 * `guide:fails` (an error example: its curl must answer an error), `guide:stream` (ended by
 * curl's --max-time) or `guide:not-run` (needs a real platform account).
 */
const guidePath = join(projectRoot(), 'docs/guide.md');
const guide = readFileSync(guidePath, 'utf8');

interface Block {
  kind: 'run' | 'setup' | 'fails' | 'stream' | 'not-run';
  code: string;
}

function shellBlocks(markdown: string): Block[] {
  const blocks: Block[] = [];
  const re = /(?:<!-- guide:(setup|fails|stream|not-run)\b[^>]*-->\n)?```sh\n([\s\S]*?)```/g;
  for (const m of markdown.matchAll(re)) blocks.push({ kind: (m[1] as Block['kind']) ?? 'run', code: m[2] });
  return blocks;
}

/** curl for each kind of block: a failed HTTP status fails a command, except where an error is the point. */
const CURL: Record<Exclude<Block['kind'], 'setup' | 'not-run'>, string> = {
  run: 'curl() { command curl --fail-with-body "$@"; }',
  fails: 'curl() { if command curl --fail-with-body "$@"; then echo "expected an error answer" >&2; return 1; fi; }',
  // 28: curl's --max-time ended the stream, as the example intends.
  stream: 'curl() { local rc=0; command curl --fail-with-body "$@" || rc=$?; [ "$rc" -eq 0 ] || [ "$rc" -eq 28 ]; }',
};

function script(blocks: Block[], vars: { base: string; app: string; key: string }, receiverPort: number): string {
  const lines = ['set -euo pipefail'];
  blocks.forEach((b, i) => {
    lines.push(`echo '<<<block ${i} ${b.kind}>>>'`);
    if (b.kind === 'not-run') return;
    if (b.kind === 'setup') {
      lines.push(`BASE=${vars.base}`, `APP=${vars.app}`, `KEY=${vars.key}`);
      return;
    }
    lines.push(CURL[b.kind], b.code.replaceAll('localhost:4000', `localhost:${receiverPort}`), 'echo');
  });
  lines.push("echo '<<<end>>>'");
  return lines.join('\n');
}

function runBash(source: string, env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    // Its own process group, so the example's background receiver goes with it.
    const p = spawn('bash', ['-c', source], { cwd: projectRoot(), env: { ...process.env, ...env }, detached: true });
    let out = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    p.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const timer = setTimeout(() => process.kill(-p.pid!, 'SIGKILL'), 90_000);
    p.on('close', (code) => {
      clearTimeout(timer);
      try {
        process.kill(-p.pid!, 'SIGKILL');
      } catch {
        // The group is already gone.
      }
      resolve({ code, out });
    });
  });
}

let env: TestEnv;
let svc: ChildService;
let base: string;

beforeAll(async () => {
  env = await createTestEnv();
  const port = await freePort();
  base = `http://localhost:${port}`;
  svc = spawnService('src/dev.ts', {
    ...env.env,
    NODE_ENV: 'development',
    PORT: String(port),
    PUBLIC_BASE_URL: base,
    LOG_LEVEL: 'warn',
  });
  // tsx compiles the whole service on start: slow on a loaded 2-core CI machine.
  await svc.waitFor(/Demo application created[\s\S]*curl [^\n]+\n/, 100_000);
}, 120_000);

afterAll(async () => {
  svc?.kill('SIGTERM');
  await svc?.exited;
  await env?.dropDatabase();
});

describe('docs/guide.md', () => {
  it('runs every example as written, in order, against npm start with the key it prints', async () => {
    const app = /app id:\s+(\S+)/.exec(svc.output())![1];
    const key = /API key:\s+(\S+)/.exec(svc.output())![1];
    const blocks = shellBlocks(guide);
    expect(blocks[0].kind).toBe('setup');
    expect(blocks.length).toBeGreaterThan(15);

    const receiverPort = await freePort();
    const r = await runBash(script(blocks, { base, app, key }, receiverPort), { RECEIVER_PORT: String(receiverPort) });
    expect(r.out, r.out).toContain('<<<end>>>');
    expect(r.code, r.out).toBe(0);

    // What block i printed (after its marker line).
    const out = (i: number) =>
      r.out
        .split(`<<<block ${i} `)[1]
        .split('<<<')[0]
        .replace(/^[^\n]*\n/, '');
    const indexOf = (needle: string) => blocks.findIndex((b) => b.code.includes(needle));
    // What the prose around the examples says they show.
    expect(out(indexOf('events/stream'))).toMatch(/^data: \{"id":"[^"]+","appId":"[^"]+","eventType":"order\.created"/m);
    expect(out(indexOf('subscription { eventStream'))).toMatch(/^event: next\ndata: \{"data":\{"eventStream":\{/m);
    expect(out(indexOf('/test"'))).toContain('"success": true');
    expect(r.out).toMatch(/verified delivery \S+: order\.created \{[^\n]*"order_id":"A-3"/);
    expect(out(indexOf('"invoice_id":"F-7"'))).toContain('"path":["payload","amount"]');
    expect(out(indexOf('limt=5'))).toContain('"path":["query","limt"]');
    expect(out(indexOf('"total":4}'))).toContain('IDEMPOTENCY_CONFLICT');
    const ids = out(indexOf('for attempt in 1 2')).trim().split('\n');
    expect(ids).toHaveLength(2);
    expect(ids[0]).toBe(ids[1]);
    expect(out(indexOf('"text\\": \\"$CODE\\"'))).toContain('["4242","5151"]');
    // The sandbox send is sent at once, and the end user's reply is queued through inbound.
    const sandbox = out(indexOf('sandbox/messages'));
    expect(sandbox).toMatch(/"external_message_id": "[^"]+"/);
    expect(sandbox).toMatch(/"status": "(sent|delivered|read)"/);
  }, 120_000);

  it('names every error code with its status', () => {
    const table = guide.split('## Errors')[1].split('\n## ')[0];
    for (const [code, status] of Object.entries(ERROR_STATUS)) {
      const row = table.split('\n').find((l) => l.startsWith('|') && l.includes(`\`${code}\``));
      expect(row, code).toMatch(new RegExp(`^\\| ${status} \\|`));
    }
  });
});
