import { createHash } from 'node:crypto';

/**
 * A UUID derived from its parts (SHA-256, shaped as a v4-style UUID): the same parts always
 * give the same id, so a retried step records the same event instead of a second one.
 */
export function derivedId(...parts: string[]): string {
  const h = createHash('sha256').update(parts.join('\u0000')).digest('hex');
  const variant = ((parseInt(h[16], 16) & 0x3) | 0x8).toString(16);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}
