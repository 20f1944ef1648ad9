import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

interface StoredFile {
  data: Buffer;
  mime: string;
}

export interface FakeMediaServer {
  /** Base URL, used as the connections' `api_base_url`. */
  base: string;
  /** Makes a file downloadable the platforms' ways under `id` (Telegram file_id, WhatsApp media id, URL path). */
  addFile(id: string, data: Buffer, mime: string): void;
  /** A plain URL for the file (Messenger, Slack, Twilio, Discord style). */
  urlOf(id: string): string;
  /** Requests seen, as "METHOD path" with the Authorization header. */
  requests: { line: string; auth?: string }[];
  /** Answer every request with this status instead (a platform outage). */
  failWith?: number;
  close(): Promise<void>;
}

const TG_TOKEN_PATH = /^\/bot([^/]+)\/getFile$/;
const TG_FILE_PATH = /^\/file\/bot([^/]+)\/(.+)$/;
const WA_MEDIA_PATH = /^\/v\d+\.\d+\/([^/]+)$/;
const WA_DOWNLOAD = /^\/wa-download\/([^/]+)$/;
const CDN = /^\/cdn\/([^/]+)$/;

/**
 * The media side of the platforms, as their API references give it, on loopback: Telegram getFile →
 * file_path → /file/bot<token>/<path>; WhatsApp GET /{version}/{media-id} (Bearer) →
 * {url, mime_type, sha256, file_size, id} → GET url with the same Bearer; and plain CDN
 * URLs. Unknown ids answer as the platforms do (404 / ok:false).
 */
export async function startFakeMediaServer(opts: { telegramToken?: string; whatsappToken?: string } = {}): Promise<FakeMediaServer> {
  const files = new Map<string, StoredFile>();
  const requests: FakeMediaServer['requests'] = [];
  const state = { failWith: undefined as number | undefined };
  const json = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'Content-Type': 'application/json' }).end(JSON.stringify(body));
  };
  const bytes = (res: ServerResponse, f: StoredFile) =>
    res.writeHead(200, { 'Content-Type': f.mime, 'Content-Length': f.data.length }).end(f.data);

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://x');
    requests.push({ line: `${req.method} ${url.pathname}`, auth: req.headers.authorization });
    if (state.failWith) return json(res, state.failWith, { error: 'unavailable' });
    let m: RegExpMatchArray | null;
    if ((m = url.pathname.match(TG_TOKEN_PATH))) {
      if (opts.telegramToken && m[1] !== opts.telegramToken)
        return json(res, 401, { ok: false, error_code: 401, description: 'Unauthorized' });
      const id = url.searchParams.get('file_id') ?? '';
      const f = files.get(id);
      if (!f) return json(res, 400, { ok: false, error_code: 400, description: 'Bad Request: invalid file_id' });
      return json(res, 200, {
        ok: true,
        result: { file_id: id, file_unique_id: `u-${id}`, file_size: f.data.length, file_path: `media/${id}.bin` },
      });
    }
    if ((m = url.pathname.match(TG_FILE_PATH))) {
      const f = files.get(m[2].replace(/^media\//, '').replace(/\.bin$/, ''));
      if (!f || (opts.telegramToken && m[1] !== opts.telegramToken))
        return json(res, 404, { ok: false, error_code: 404, description: 'Not Found' });
      return bytes(res, f);
    }
    if ((m = url.pathname.match(WA_MEDIA_PATH))) {
      if (opts.whatsappToken && req.headers.authorization !== `Bearer ${opts.whatsappToken}`)
        return json(res, 401, { error: { message: 'Invalid OAuth access token', type: 'OAuthException', code: 190 } });
      const f = files.get(m[1]);
      if (!f) return json(res, 404, { error: { message: 'Unsupported get request', type: 'GraphMethodException', code: 100 } });
      const host = `http://${req.headers.host}`;
      return json(res, 200, {
        messaging_product: 'whatsapp',
        url: `${host}/wa-download/${m[1]}`,
        mime_type: f.mime,
        sha256: 'x',
        file_size: f.data.length,
        id: m[1],
      });
    }
    if ((m = url.pathname.match(WA_DOWNLOAD))) {
      if (opts.whatsappToken && req.headers.authorization !== `Bearer ${opts.whatsappToken}`) return json(res, 401, { error: 'no token' });
      const f = files.get(m[1]);
      return f ? bytes(res, f) : json(res, 404, {});
    }
    if ((m = url.pathname.match(CDN))) {
      const f = files.get(m[1]);
      return f ? bytes(res, f) : json(res, 404, {});
    }
    json(res, 404, { error: 'not found' });
  };

  const server = createServer(handle);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    base,
    addFile: (id, data, mime) => void files.set(id, { data, mime }),
    urlOf: (id) => `${base}/cdn/${id}`,
    requests,
    get failWith() {
      return state.failWith;
    },
    set failWith(v) {
      state.failWith = v;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
