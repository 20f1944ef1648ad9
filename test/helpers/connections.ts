import { expect } from 'vitest';
import type { AppCredentials, TestStack } from './stack.js';

/** Creates a platform connection over REST and returns its public form (fails the test on anything but 201). */
export async function connect(s: TestStack, auth: AppCredentials, platform: string, config: Record<string, unknown>, name = `${platform.toLowerCase()} test`) {
  const r = await s.request('POST', '/v1/platform-connections', { auth, body: { platform_name: platform, name, config } });
  expect(r.status, r.text).toBe(201);
  return r.json as { id: string; webhook_url: string; config: Record<string, unknown>; health: { status: string } };
}

/** Polls `fn` until it returns something truthy, or fails after `timeoutMs`. */
export async function eventually<T>(fn: () => Promise<T | undefined | false | null>, timeoutMs = 10_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
