import { request } from 'undici';
import { guardedDispatcher, refusedUrl, TargetRefusedError, type OutboundPolicy } from '../net/outbound-policy.js';
import { getAdapter } from './registry.js';
import type { DownloadedMedia, InboundMedia, MediaFetch, PlatformName } from './types.js';

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
  if (refused) throw new TargetRefusedError(refused, 'media download refused by the outbound address policy');
  return request(url, {
    method: 'GET',
    headers,
    headersTimeout: f.timeoutMs,
    bodyTimeout: f.timeoutMs,
    signal: f.signal,
    ...(f.policy === 'public-https' ? { dispatcher: guardedDispatcher() } : {}),
  });
}

async function fetchBytes(
  url: string,
  headers: Record<string, string>,
  f: Fetching,
  redirects = MAX_REDIRECTS,
): Promise<{ data: Buffer; contentType?: string }> {
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

/** The GETs of one download, all within its bounds. */
function fetcher(f: Fetching): MediaFetch {
  return {
    json: async (url, headers = {}) => {
      const res = await get(url, headers, f);
      return { status: res.statusCode, body: await res.body.json() };
    },
    bytes: (url, headers = {}) => fetchBytes(url, headers, f),
  };
}

/**
 * Downloads an inbound message's media: bytes that came inside the delivery (e-mail
 * attachments) as they are, anything else the platform's way (its adapter's `downloadMedia`).
 */
export async function downloadMedia(
  platform: PlatformName,
  config: Record<string, unknown>,
  media: InboundMedia,
  policy: OutboundPolicy,
  timeoutMs = 20_000,
): Promise<DownloadedMedia> {
  if (media.inlineBase64 !== undefined) {
    const data = Buffer.from(media.inlineBase64, 'base64');
    if (data.length > MAX_BYTES) throw new Error('media larger than 50 MB');
    return { data, mimeType: media.mimeType, filename: media.filename };
  }
  // One deadline for the whole download, however many requests and hops it takes.
  const f: Fetching = { policy, timeoutMs, signal: AbortSignal.timeout(timeoutMs * 2) };
  return getAdapter(platform).downloadMedia(config, media, fetcher(f));
}
