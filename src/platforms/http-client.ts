import { request, type FormData } from 'undici';
import { guardedDispatcher, refusedUrl, TargetRefusedError } from '../net/outbound-policy.js';

export interface PlatformCall {
  method: 'GET' | 'POST';
  url: string;
  headers?: Record<string, string>;
  /** A JSON body (sent as application/json), form fields (urlencoded), multipart form data or raw bytes. */
  json?: unknown;
  form?: Record<string, string>;
  multipart?: FormData;
  bytes?: { data: Buffer; contentType: string };
  timeoutMs: number;
  /** Only public addresses may be reached (SendContext.guarded). */
  guarded?: boolean;
}

export interface PlatformAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  /** The body parsed as JSON, or undefined when it is not JSON. */
  json: unknown;
}

/**
 * One HTTP call to a platform through undici's pooled keep-alive agent, bounded by
 * `timeoutMs` end to end. Throws only for network failures and timeouts; every HTTP answer
 * comes back as a value for the platform's own error mapping.
 */
export async function callPlatform(call: PlatformCall): Promise<PlatformAnswer> {
  const headers: Record<string, string> = { 'user-agent': 'messaging-gateway', ...call.headers };
  let body: string | Buffer | FormData | undefined;
  if (call.json !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(call.json);
  } else if (call.form) {
    headers['content-type'] = 'application/x-www-form-urlencoded';
    body = new URLSearchParams(call.form).toString();
  } else if (call.multipart) {
    body = call.multipart;
  } else if (call.bytes) {
    headers['content-type'] = call.bytes.contentType;
    body = call.bytes.data;
  }
  if (call.guarded) {
    const refused = refusedUrl(new URL(call.url), 'public-https');
    // Never the URL itself in the message: it may carry a token.
    if (refused) throw new TargetRefusedError(refused);
  }
  const res = await request(call.url, {
    method: call.method,
    headers,
    body,
    ...(call.guarded ? { dispatcher: guardedDispatcher() } : {}),
    signal: AbortSignal.timeout(call.timeoutMs),
    headersTimeout: call.timeoutMs,
    bodyTimeout: call.timeoutMs,
  });
  const text = await res.body.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.statusCode, headers: res.headers, text, json };
}

/** `config.api_base_url`, else the context's default, else the platform's real address; no trailing slash. */
export function baseUrl(config: { api_base_url?: string }, ctx: { defaultBaseUrl?: string }, real: string): string {
  return (config.api_base_url ?? ctx.defaultBaseUrl ?? real).replace(/\/+$/, '');
}
