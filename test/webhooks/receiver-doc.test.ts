import { createHmac } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { signatureHeaders } from '../../src/webhooks/signing.js';
import { projectRoot } from '../../src/project-root.js';

/** The helper exactly as docs/webhook-receiver.md shows it, loaded as a module. */
const helperBlock = (file: string) =>
  /<!-- verify-helper:start[^>]*-->\s*```js\n([\s\S]*?)```\s*<!-- verify-helper:end -->/.exec(
    readFileSync(join(projectRoot(), file), 'utf8'),
  )?.[1];

async function documentedHelper(): Promise<
  (body: unknown, headers: unknown, secrets: unknown, o?: { now?: number; toleranceSeconds?: number }) => unknown
> {
  const block = helperBlock('docs/webhook-receiver.md');
  expect(block).toBeDefined();
  // The README shows the same helper.
  expect(helperBlock('README.md')).toBe(block);
  const file = join(mkdtempSync(join(tmpdir(), 'verify-')), 'verify.mjs');
  writeFileSync(file, block!);
  return (await import(pathToFileURL(file).href)).verifyWebhook;
}

describe('the documented receiver helper', () => {
  it('accepts what the gateway signs, with either secret during a rotation, and rejects tampering and stale timestamps', async () => {
    const verify = await documentedHelper();
    const body = '{"id":"d1","event_id":"e1","payload":{"b":1,"a":"é"}}';
    const now = Date.now();
    const ts = Math.floor(now / 1000);
    const headers = signatureHeaders({
      deliveryId: 'd1',
      timestamp: ts,
      body,
      secrets: ['whsec_new_secret_aaaaaaaaaaaaaaaaaaaaaaaa', 'old-secret-0123456789'],
    });
    const delivery = JSON.parse(body);
    expect(verify(body, headers, ['whsec_new_secret_aaaaaaaaaaaaaaaaaaaaaaaa'])).toEqual(delivery);
    expect(verify(Buffer.from(body), headers, 'old-secret-0123456789')).toEqual(delivery);
    expect(() => verify(body, headers, ['someone-else-secret'])).toThrow('No matching webhook signature');
    expect(() => verify(body.replace('"b":1', '"b":2'), headers, 'old-secret-0123456789')).toThrow('No matching webhook signature');
    expect(() => verify(body, headers, 'old-secret-0123456789', { now: now + 301_000 })).toThrow('too far from now');
    expect(verify(body, headers, 'old-secret-0123456789', { now: now + 301_000, toleranceSeconds: 400 })).toEqual(delivery);
    expect(() => verify(body, { ...headers, 'x-service-signature': 'sha256=zz' }, 'old-secret-0123456789')).toThrow(
      'No matching webhook signature',
    );
    // The signed string is `<timestamp>.<body>`, not the body alone.
    const bodyOnly = `sha256=${createHmac('sha256', 'old-secret-0123456789').update(body).digest('hex')}`;
    expect(() => verify(body, { ...headers, 'x-service-signature': bodyOnly }, 'old-secret-0123456789')).toThrow(
      'No matching webhook signature',
    );
  });

  it("takes the client's argument order, and says which argument is wrong when they are swapped", async () => {
    const verify = await documentedHelper();
    const body = '{"id":"d1"}';
    const headers = signatureHeaders({ deliveryId: 'd1', timestamp: Math.floor(Date.now() / 1000), body, secrets: ['s3cret'] });
    // The order the client used to take: (secrets, rawBody, headers).
    expect(() => verify(['s3cret'], body, headers)).toThrow(
      new TypeError('verifyWebhook(rawBody, headers, secrets): rawBody must be a string or Buffer'),
    );
    expect(() => verify('s3cret', body, headers)).toThrow(
      new TypeError('verifyWebhook(rawBody, headers, secrets): headers must be an object'),
    );
    expect(() => verify(body, headers, headers)).toThrow(
      new TypeError('verifyWebhook(rawBody, headers, secrets): secrets must be a string or strings'),
    );
    expect(verify(body, headers, 's3cret')).toEqual({ id: 'd1' });
  });
});
