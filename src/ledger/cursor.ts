import { fail, ok, type Result } from '../errors.js';

/**
 * The one cursor codec. A cursor names a position in one application's ledger: the event's
 * creation time and id plus its `seq`, the per-application position the ledger
 * assigns under its commit lock (what readers actually page on). Opaque base64url to clients.
 */
export interface Cursor {
  seq: number;
  createdAt: string;
  id: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function encodeCursor(c: Cursor): string {
  return Buffer.from(`v1|${c.seq}|${c.createdAt}|${c.id}`, 'utf8').toString('base64url');
}

export function decodeCursor(raw: string): Result<Cursor> {
  const bad = fail('INVALID_CURSOR', 'Malformed cursor: pass back a cursor exactly as the service returned it');
  if (typeof raw !== 'string' || raw.length === 0 || raw.length > 200 || !/^[A-Za-z0-9_-]+$/.test(raw)) return bad;
  const [v, seq, createdAt, id, ...rest] = Buffer.from(raw, 'base64url').toString('utf8').split('|');
  if (v !== 'v1' || rest.length || !/^\d{1,15}$/.test(seq ?? '') || !UUID.test(id ?? '') || Number.isNaN(Date.parse(createdAt ?? '')))
    return bad;
  return ok({ seq: Number(seq), createdAt, id });
}
