import { expect } from 'vitest';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { startReceiver, type Receiver } from './receiver.js';

/** A stack with one application whose webhook subscription sends `pattern`'s events to a receiver of its own. */
export interface Subscribed {
  s: TestStack;
  app: AppCredentials;
  rx: Receiver;
  subscriptionId: string;
  close(): Promise<void>;
}

export async function subscribedStack(pattern: string, options: Parameters<typeof startTestStack>[0] = {}): Promise<Subscribed> {
  const s = await startTestStack(options);
  const app = await s.createApp();
  const rx = await startReceiver();
  const sub = await s.request('POST', '/v1/webhook-subscriptions', {
    auth: app,
    body: { name: pattern, target_url: rx.url, event_patterns: [pattern] },
  });
  expect(sub.status, sub.text).toBe(201);
  return {
    s,
    app,
    rx,
    subscriptionId: sub.json.id,
    async close() {
      await rx.close();
      await s.close();
    },
  };
}
