import { request } from 'undici';
import { guardedDispatcher, refusedUrl, TargetRefusedError, type OutboundPolicy } from '../net/outbound-policy.js';
import type { InboundMedia, PlatformName } from './types.js';

export interface DownloadedMedia {
  data: Buffer;
  mimeType?: string;
  filename?: string;
}

const REAL_BASE: Partial<Record<PlatformName, string>> = {
  TELEGRAM: 'https://api.telegram.org',
  WHATSAPP: 'https://graph.facebook.com',
};

const MAX_BYTES = 50 * 1024 * 1024;
/** Redirect hops followed (Twilio's media URL redirects once to storage). */
const MAX_REDIRECTS = 3;

/** One download's bounds: where it may go (every hop judged again) and until when. */
interface Fetching {
  policy: OutboundPolicy;
  timeoutMs: number;
  signal: AbortSignal;
}

/**
 * A GET under the outbound address policy: every hop (the first URL and each redirect) is
 * judged before it is requested, and its sockets only reach addresses the policy accepts.
 * Media URLs come from inbound bodies, so they are as much tenant input as a webhook target.
 */
async function get(url: string, headers: Record<string, string>, f: Fetching) {
  const refused = refusedUrl(new URL(url), f.policy);
  // The URL may carry a token (Telegram's file URL does): never put it in the message.
  if (refused) throw new TargetRefusedError(`media download refused by the outbound address policy: ${refused}`);
  return request(url, {
    method: 'GET',
    headers,
    headersTimeout: f.timeoutMs,
    bodyTimeout: f.timeoutMs,
    signal: f.signal,
    ...(f.policy === 'public-https' ? { dispatcher: guardedDispatcher() } : {}),
  });
}

async function fetchBytes(url: string, headers: Record<string, string>, f: Fetching, redirects = MAX_REDIRECTS): Promise<{ data: Buffer; contentType?: string }> {
  const res = await get(url, headers, f);
  const location = res.headers.location;
  if ([301, 302, 303, 307, 308].includes(res.statusCode) && typeof location === 'string') {
    await res.body.dump();
    if (redirects === 0) throw new Error(`media download redirected more than ${MAX_REDIRECTS} times`);
    // Twilio serves media through a redirect to storage: follow it without our credentials.
    return fetchBytes(new URL(location, url).toString(), {}, f, redirects - 1);
  }
  if (res.statusCode >= 300) {
    await res.body.dump();
    // The URL may carry a token (Telegram's file URL does): never put it in the message.
    throw new Error(`media download failed with HTTP ${res.statusCode}`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res.body) {
    size += chunk.length;
    if (size > MAX_BYTES) throw new Error('media larger than 50 MB');
    chunks.push(chunk as Buffer);
  }
  const ct = res.headers['content-type'];
  return { data: Buffer.concat(chunks), contentType: typeof ct === 'string' ? ct.split(';')[0] : undefined };
}

/**
 * Downloads an inbound message's media the platform's way (PLATFORMS.md): Telegram getFile
 * then the file path; WhatsApp media id → short-lived URL (fetched at once, it expires in
 * 5 minutes) with the bearer token; plain URLs for Messenger/Instagram, Twilio (basic auth)
 * and Slack (bearer).
 */
export async function downloadMedia(
  platform: PlatformName,
  config: Record<string, unknown>,
  media: InboundMedia,
  policy: OutboundPolicy,
  timeoutMs = 20_000,
): Promise<DownloadedMedia> {
  // One deadline for the whole download, however many requests and hops it takes.
  const f: Fetching = { policy, timeoutMs, signal: AbortSignal.timeout(timeoutMs * 2) };
  if (media.inlineBase64 !== undefined) {
    const data = Buffer.from(media.inlineBase64, 'base64');
    if (data.length > MAX_BYTES) throw new Error('media larger than 50 MB');
    return { data, mimeType: media.mimeType, filename: media.filename };
  }
  const base = String(config.api_base_url ?? REAL_BASE[platform] ?? '').replace(/\/$/, '');
  if (platform === 'TELEGRAM' && media.platformFileId) {
    const token = String(config.bot_token);
    const meta = await get(`${base}/bot${token}/getFile?file_id=${encodeURIComponent(media.platformFileId)}`, {}, f);
    const body = (await meta.body.json()) as { ok?: boolean; result?: { file_path?: string } };
    if (!body.ok || !body.result?.file_path) throw new Error('telegram getFile failed');
    const { data, contentType } = await fetchBytes(`${base}/file/bot${token}/${body.result.file_path}`, {}, f);
    return { data, mimeType: media.mimeType ?? contentType, filename: body.result.file_path.split('/').pop() };
  }
  if (platform === 'WHATSAPP' && media.platformFileId) {
    const auth = { Authorization: `Bearer ${String(config.access_token)}` };
    const version = String(config.api_version ?? 'v21.0');
    const meta = await get(`${base}/${version}/${encodeURIComponent(media.platformFileId)}`, auth, f);
    const info = (await meta.body.json()) as { url?: string; mime_type?: string };
    if (meta.statusCode >= 300 || !info.url) throw new Error(`whatsapp media lookup failed with HTTP ${meta.statusCode}`);
    const { data, contentType } = await fetchBytes(info.url, auth, f);
    return { data, mimeType: info.mime_type ?? media.mimeType ?? contentType };
  }
  if (!media.url) throw new Error('media has neither a file id nor a URL');
  const headers: Record<string, string> = {};
  if (platform === 'SMS') headers.Authorization = `Basic ${Buffer.from(`${config.account_sid}:${config.auth_token}`).toString('base64')}`;
  if (platform === 'SLACK') headers.Authorization = `Bearer ${String(config.bot_token)}`;
  const { data, contentType } = await fetchBytes(media.url, headers, f);
  return { data, mimeType: media.mimeType ?? contentType };
}
