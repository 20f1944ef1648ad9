import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../src/config.js';
import { spawnService } from '../helpers/stack.js';

describe('config', () => {
  it('applies documented defaults', () => {
    const c = parseConfig({});
    expect(c.PORT).toBe(3000);
    expect(c.RATE_LIMIT_PER_MINUTE).toBe(100);
    expect(c.WORKER_QUEUES.map((w) => w.queue)).toEqual(['inbound', 'send', 'transcription', 'ledger', 'webhook', 'maintenance']);
    expect(c.QUEUE_SHARDS).toBe(1);
    expect(c.WEBHOOK_RETRY_DELAYS_MS).toEqual([0, 60000, 300000, 1800000, 7200000]);
    expect(c.OUTBOUND_ADDRESS_POLICY).toBe('any');
  });

  it('reads WORKER_QUEUES shards: ranges and lists merge per queue, a queue named whole is served whole', () => {
    const c = parseConfig({ QUEUE_SHARDS: '4', WORKER_QUEUES: 'ledger:0-1,webhook,ledger:3,send:2,send' });
    expect(c.WORKER_QUEUES).toEqual([{ queue: 'ledger', shards: [0, 1, 3] }, { queue: 'webhook' }, { queue: 'send' }]);
  });

  it('names the variable of a bad value', () => {
    expect(() => parseConfig({ PORT: 'abc' })).toThrow(ConfigError);
    expect(() => parseConfig({ PORT: 'abc' })).toThrow(/^PORT: /);
    expect(() => parseConfig({ SECRETS_KEY: 'short' })).toThrow(/^SECRETS_KEY: .*32/);
    expect(() => parseConfig({ WORKER_QUEUES: 'ledger,bogus' })).toThrow(/^WORKER_QUEUES: unknown queue bogus/);
    expect(() => parseConfig({ RATE_LIMIT_PER_MINUTE: '0' })).toThrow(/^RATE_LIMIT_PER_MINUTE: /);
    expect(() => parseConfig({ WORKER_QUEUES: 'ledger:0-x' })).toThrow(/^WORKER_QUEUES: bad shards in ledger:0-x/);
    expect(() => parseConfig({ WORKER_QUEUES: 'maintenance:0' })).toThrow(/^WORKER_QUEUES: bad shards/);
    expect(() => parseConfig({ QUEUE_SHARDS: '2', WORKER_QUEUES: 'ledger:1-2' })).toThrow(
      /^WORKER_QUEUES: ledger:2 beyond QUEUE_SHARDS \(2\)/,
    );
    expect(() => parseConfig({ QUEUE_SHARDS: '0' })).toThrow(/^QUEUE_SHARDS: /);
    for (const bad of ['{', '{"TELEGRAM":{"recipient":{"rate":0,"perMs":1000,"burst":0}}}', '{"TELEGRAM":{"sender":{}}}'])
      expect(() => parseConfig({ PLATFORM_RATE_BUDGETS: bad }), bad).toThrow(/^PLATFORM_RATE_BUDGETS: /);
  });

  it('reads PLATFORM_RATE_BUDGETS as per-platform replacements of single budgets', () => {
    const budget = { rate: 250, perMs: 1000, burst: 0 };
    expect(parseConfig({ PLATFORM_RATE_BUDGETS: JSON.stringify({ WHATSAPP: { connection: budget } }) }).PLATFORM_RATE_BUDGETS).toEqual({
      WHATSAPP: { connection: budget },
    });
    expect(parseConfig({}).PLATFORM_RATE_BUDGETS).toEqual({});
  });

  it('requires ADMIN_TOKEN and SECRETS_KEY in production', () => {
    expect(() => parseConfig({ NODE_ENV: 'production', SECRETS_KEY: 'x'.repeat(32) })).toThrow(/^ADMIN_TOKEN: is required in production/);
    const c = parseConfig({ NODE_ENV: 'production', SECRETS_KEY: 'x'.repeat(32), ADMIN_TOKEN: 'y'.repeat(16) });
    expect(c.OUTBOUND_ADDRESS_POLICY).toBe('public-https');
  });

  it('stops the web process at start-up with one line naming the variable', async () => {
    const svc = spawnService('src/web.ts', { PORT: 'not-a-port', LOG_LEVEL: 'silent' });
    expect(await svc.exited).toBe(1);
    const lines = svc.output().trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^config error: PORT: /);
  });

  it('stops the worker process the same way', async () => {
    const svc = spawnService('workers/index.ts', { REDIS_URL: 'http://nope' });
    expect(await svc.exited).toBe(1);
    expect(svc.output().trim()).toMatch(/^config error: REDIS_URL: expected a redis:\/\/ URL$/);
  });
});
