import { describe, expect, it } from 'vitest';
import { loggableUrl } from '../../src/http/app.js';

describe('request URLs in logs', () => {
  it('drop the inbound webhook secret segment and the query string', () => {
    expect(loggableUrl('/webhooks/3f2a/s3cr3t-value?hub.verify_token=x')).toBe('/webhooks/3f2a/[redacted]');
  });

  it('drop a link code being activated', () => {
    expect(loggableUrl('/v1/link-codes/K7QX9MPA/activate')).toBe('/v1/link-codes/[redacted]/activate');
  });

  it('keep ordinary API paths as they are', () => {
    expect(loggableUrl('/v1/events?after=abc')).toBe('/v1/events');
    expect(loggableUrl('/v1/users/42')).toBe('/v1/users/42');
  });
});
