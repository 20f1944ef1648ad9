import { expect } from 'vitest';
import type { AppCredentials, TestStack } from '../helpers/stack.js';

/** The REST calls a destination test makes as one application: subscribe, emit, read the delivery log. */
export function destinationApi(s: () => TestStack, a: () => AppCredentials, kind: string) {
  return {
    async subscribe(destination: Record<string, unknown>, patterns = ['order.*']) {
      const r = await s().request('POST', '/v1/webhook-subscriptions', {
        auth: a(),
        body: { name: kind, event_patterns: patterns, destination: { kind, ...destination } },
      });
      expect(r.status, JSON.stringify(r.json)).toBe(201);
      return r.json as { id: string; secret: string; target_url: string; destination: Record<string, unknown> };
    },
    async emit(eventType: string, payload: Record<string, unknown> = {}) {
      const r = await s().request('POST', '/v1/events', { auth: a(), body: { event_type: eventType, payload } });
      expect(r.status).toBe(201);
      return r.json as { id: string; cursor: string; created_at: string };
    },
    logsOf: async (subId: string) =>
      (await s().request('GET', `/v1/webhook-subscriptions/${subId}/deliveries?limit=200`, { auth: a() })).json.data as any[],
  };
}
