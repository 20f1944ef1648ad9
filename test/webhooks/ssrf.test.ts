import { createServer, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isPublicAddress } from '../../src/net/outbound-policy.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { eventually } from './receiver.js';

let s: TestStack;
let a: AppCredentials;
let tcp: Server;
let port: number;
let connections = 0;

beforeAll(async () => {
  s = await startTestStack({
    workers: ['ledger', 'webhook'],
    env: { WEBHOOK_TARGET_POLICY: 'public-https', WEBHOOK_RETRY_DELAYS_MS: '0' },
  });
  a = await s.createApp();
  // Counts every connection attempt that gets through: a refused target must never reach it.
  tcp = createServer((sock) => {
    connections++;
    sock.destroy();
  });
  await new Promise<void>((r) => tcp.listen(0, '127.0.0.1', r));
  port = (tcp.address() as { port: number }).port;
});
afterAll(async () => {
  tcp.close();
  await s.close();
});

const create = (target_url: string) =>
  s.request('POST', '/v1/webhook-subscriptions', { auth: a, body: { name: 's', target_url, event_patterns: ['*'] } });

describe('SSRF protection under public-https', () => {
  it('refuses plain http and non-public address literals at creation', async () => {
    for (const url of [
      'http://example.com/hook',
      `https://127.0.0.1:${port}/`,
      'https://10.0.0.5/x',
      'https://169.254.169.254/latest',
      'https://[::1]/x',
      'https://[::ffff:127.0.0.1]/',
      'https://192.168.1.1/',
    ]) {
      const r = await create(url);
      expect(r.status, url).toBe(400);
      expect(r.json.error.code, url).toBe('INVALID_WEBHOOK_TARGET');
      expect(r.json.error.details[0].path).toEqual(['target_url']);
    }
    expect((await create('https://example.com/hook')).status).toBe(201);
  });

  it('refuses a DNS name that resolves to a loopback address at send time, without connecting', async () => {
    const c = await create(`https://localhost:${port}/hook`);
    expect(c.status).toBe(201);
    const t = await s.request('POST', `/v1/webhook-subscriptions/${c.json.id}/test`, { auth: a });
    expect(t.json.success).toBe(false);
    expect(t.json.status_code).toBeNull();
    expect(t.json.error_message).toMatch(/refused: localhost resolves to non-public address (127\.0\.0\.1|::1)/);

    const ev = await s.request('POST', '/v1/events', { auth: a, body: { event_type: 'ssrf.probe', payload: {} } });
    expect(ev.status).toBe(201);
    const logs = await eventually(async () => {
      const r = await s.request('GET', `/v1/webhook-subscriptions/${c.json.id}/deliveries`, { auth: a });
      const l = r.json.data.filter((x: { event_type: string }) => x.event_type === 'ssrf.probe');
      return l.length === 1 && l;
    });
    expect(logs[0]).toMatchObject({ status: 'failed', status_code: null });
    expect(logs[0].error_message).toMatch(/non-public address/);
    expect(connections).toBe(0);
  });

  it('classifies addresses', () => {
    for (const ip of [
      '127.0.0.1',
      '10.1.2.3',
      '172.16.0.1',
      '192.168.0.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '::1',
      '::',
      'fe80::1',
      'fd00::1',
      '::ffff:10.0.0.1',
      '224.0.0.1',
    ]) {
      expect(isPublicAddress(ip), ip).toBe(false);
    }
    for (const ip of ['8.8.8.8', '1.1.1.1', '2606:4700:4700::1111', '::ffff:8.8.8.8']) expect(isPublicAddress(ip), ip).toBe(true);
  });
});
