/**
 * The portal's only way to the service: the public REST API and the session exchange,
 * signed in by the HttpOnly session cookie the browser attaches. A state-changing request also
 * carries the session's CSRF token, which only this page (not another site) can read.
 */

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
  }
}

let csrfToken: string | undefined;
/** Called with each session answer; mutating requests send it back as X-CSRF-Token. */
export const setCsrfToken = (token: string | undefined) => {
  csrfToken = token;
};

const SAFE = new Set(['GET', 'HEAD']);
/** Set by the session layer: a 401 anywhere means the session ended, so the page signs out. */
let onUnauthorized: (() => void) | undefined;
export const whenUnauthorized = (fn: () => void) => {
  onUnauthorized = fn;
};

export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (!SAFE.has(method) && csrfToken) headers['X-CSRF-Token'] = csrfToken;
  const r = await fetch(path, {
    method,
    headers,
    credentials: 'same-origin',
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  const json = text ? safeJson(text) : undefined;
  if (!r.ok) {
    const e = (json as { error?: { code?: string; message?: string; details?: unknown } } | undefined)?.error;
    if (r.status === 401) onUnauthorized?.();
    throw new ApiError(r.status, e?.code ?? `HTTP_${r.status}`, e?.message ?? (text.slice(0, 200) || r.statusText), e?.details);
  }
  return json as T;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** A query string from the set values only. */
export function qs(params: Record<string, string | number | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}

export const errorText = (e: unknown) => (e instanceof ApiError ? `${e.message} (${e.code})` : e instanceof Error ? e.message : String(e));
