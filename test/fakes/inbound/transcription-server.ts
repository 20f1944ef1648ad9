import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface TranscriptionCall {
  model: string | null;
  responseFormat: string | null;
  filename: string | null;
  fileType: string;
  fileBytes: number;
  authorization?: string;
}

export interface FakeTranscriptionServer {
  /** TRANSCRIPTION_API_BASE for the service. */
  base: string;
  calls: TranscriptionCall[];
  /** What the next requests get: a transcript, or an HTTP error status. */
  answer: { text: string; language?: string; duration?: number } | { status: number };
  /** While set, requests wait for it before answering (to observe the "held" state). */
  gate?: Promise<void>;
  close(): Promise<void>;
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/**
 * An OpenAI-compatible transcription endpoint (`POST /v1/audio/transcriptions`, multipart
 * `file` + `model`, verbose_json answer), as hosted and self-hosted Whisper servers offer it.
 */
export async function startFakeTranscription(): Promise<FakeTranscriptionServer> {
  const state: Omit<FakeTranscriptionServer, 'base' | 'close'> = {
    calls: [],
    answer: { text: 'hello from the voice note', language: 'english', duration: 3.2 },
  };
  const server = createServer(async (req, res) => {
    if (req.method !== 'POST' || req.url !== '/v1/audio/transcriptions') return void res.writeHead(404).end();
    const body = await readBody(req);
    // Parse the multipart body the way any server would, with the platform's own parser.
    const form = await new Request('http://x', {
      method: 'POST',
      headers: { 'content-type': String(req.headers['content-type']) },
      body: new Uint8Array(body),
    }).formData();
    const file = form.get('file');
    state.calls.push({
      model: form.get('model') as string | null,
      responseFormat: form.get('response_format') as string | null,
      filename: file instanceof File ? file.name : null,
      fileType: file instanceof Blob ? file.type : '',
      fileBytes: file instanceof Blob ? file.size : 0,
      authorization: req.headers.authorization,
    });
    if (state.gate) await state.gate;
    const a = state.answer;
    if ('status' in a)
      return void res.writeHead(a.status, { 'Content-Type': 'application/json' }).end(JSON.stringify({ error: { message: 'overloaded' } }));
    res
      .writeHead(200, { 'Content-Type': 'application/json' })
      .end(JSON.stringify({ task: 'transcribe', language: a.language, duration: a.duration, text: a.text, segments: [] }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return Object.assign(state, {
    base,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  });
}
