import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

// ajv-formats is CommonJS; under NodeNext its default export arrives wrapped.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (ajv: Ajv2020) => Ajv2020;

interface MediaType {
  schema?: unknown;
}
interface Operation {
  operationId: string;
  responses: Record<string, { description: string; content?: Record<string, MediaType> }>;
}
export interface OpenApiDocument {
  paths: Record<string, Record<string, Operation>>;
  [key: string]: unknown;
}

/** What of an answer the contract judges; `body` is read only when the answer is JSON. */
export interface Answer {
  status: number;
  contentType: string | null;
  body: () => Promise<string>;
}

const DOCUMENT_ID = 'openapi.json';
/** Bodies other than JSON are not parsed; a declared `application/octet-stream` stands for any sniffed type. */
const ANY_BYTES = 'application/octet-stream';

const pointer = (...segments: string[]) =>
  `#/${segments.map((s) => encodeURIComponent(s.replaceAll('~', '~0').replaceAll('/', '~1'))).join('/')}`;

/**
 * The service's OpenAPI document as a checker of answers: an answer from a documented
 * operation must have a declared status, a declared media type, and (JSON) a body its schema
 * accepts. Requests outside the document (GraphQL, inbound webhooks, probes, unknown routes)
 * are not judged.
 */
export class OpenApiContract {
  private readonly ajv = new Ajv2020({ strict: false, allErrors: true });
  private readonly validators = new Map<string, ValidateFunction>();
  private readonly templates: { template: string; re: RegExp; literals: number }[];

  constructor(readonly document: OpenApiDocument) {
    addFormats(this.ajv);
    this.ajv.addSchema(document as object, DOCUMENT_ID);
    // Express matches paths case-insensitively and with or without a trailing slash.
    this.templates = Object.keys(document.paths).map((template) => ({
      template,
      re: new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+')}/?$`, 'i'),
      literals: template.split('/').filter((s) => s && !s.startsWith('{')).length,
    }));
  }

  /** The documented operation a request reaches, if any: the template with most literal segments wins, as express's order does here. */
  operation(method: string, path: string): { template: string; op: Operation } | undefined {
    const m = method.toLowerCase();
    const found = this.templates
      .filter((t) => t.re.test(path) && this.document.paths[t.template][m])
      .sort((a, b) => b.literals - a.literals)[0];
    return found && { template: found.template, op: this.document.paths[found.template][m] };
  }

  /** Throws naming the drift when `answer` is not what the document declares for `method path`. */
  async check(method: string, url: string, answer: Answer): Promise<void> {
    if (method.toUpperCase() === 'HEAD' || method.toUpperCase() === 'OPTIONS') return;
    const path = new URL(url, 'http://x').pathname;
    const found = this.operation(method, path);
    if (!found) return;
    const { template, op } = found;
    const where = `${method.toUpperCase()} ${path} (${op.operationId})`;
    const declared = op.responses[String(answer.status)];
    if (!declared)
      throw new Error(
        `OpenAPI drift: ${where} answered ${answer.status}, which the document does not declare (declared: ${Object.keys(op.responses).join(', ')})\n${await answer.body().catch(() => '')}`,
      );
    const mediaType = answer.contentType?.split(';')[0].trim().toLowerCase();
    const content = declared.content ?? {};
    if (!mediaType) {
      if (Object.keys(content).length && answer.status !== 204 && (await answer.body()) !== '')
        throw new Error(`OpenAPI drift: ${where} answered ${answer.status} with a body but no Content-Type`);
      return;
    }
    if (!(mediaType in content) && !(ANY_BYTES in content))
      throw new Error(
        `OpenAPI drift: ${where} answered ${answer.status} as ${mediaType}; the document declares ${Object.keys(content).join(', ') || 'no body'}`,
      );
    if (mediaType !== 'application/json' || !(mediaType in content)) return;
    const text = await answer.body();
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new Error(
        `OpenAPI drift: ${where} answered ${answer.status} as application/json but the body is not JSON: ${text.slice(0, 200)}`,
      );
    }
    this.validate(where, answer.status, body, template, method.toLowerCase(), String(answer.status));
  }

  /** Throws unless `body` matches the declared JSON schema of that operation's status. */
  validate(where: string, status: number, body: unknown, template: string, method: string, statusKey: string): void {
    const ref = `${DOCUMENT_ID}${pointer('paths', template, method, 'responses', statusKey, 'content', 'application/json', 'schema')}`;
    let validate = this.validators.get(ref);
    if (!validate) {
      validate = this.ajv.compile({ $ref: ref });
      this.validators.set(ref, validate);
    }
    if (validate(body)) return;
    const problems = (validate.errors ?? [])
      .map(
        (e) =>
          `  ${e.instancePath || '(body)'} ${e.message}${e.params && Object.keys(e.params).length ? ` ${JSON.stringify(e.params)}` : ''}`,
      )
      .join('\n');
    throw new Error(
      `OpenAPI drift: ${where} answered ${status} with a body its schema refuses:\n${problems}\n${JSON.stringify(body).slice(0, 500)}`,
    );
  }

  /** Validates `body` as the answer `status` of the operation at `method path` (for tests of the checker itself). */
  validateBody(method: string, path: string, status: number, body: unknown): void {
    const found = this.operation(method, path);
    if (!found) throw new Error(`No documented operation for ${method} ${path}`);
    if (!found.op.responses[String(status)]) throw new Error(`${found.op.operationId} declares no ${status}`);
    this.validate(
      `${method.toUpperCase()} ${path} (${found.op.operationId})`,
      status,
      body,
      found.template,
      method.toLowerCase(),
      String(status),
    );
  }
}

const contracts = new Map<string, Promise<OpenApiContract>>();

/** The contract of the service at `origin`, read once from its own `/v1/openapi.json`. */
export function contractOf(origin: string): Promise<OpenApiContract> {
  let contract = contracts.get(origin);
  if (!contract) {
    contract = (async () => {
      const r = await fetch(`${origin}/v1/openapi.json`);
      if (r.status !== 200) throw new Error(`${origin}/v1/openapi.json answered ${r.status}`);
      return new OpenApiContract((await r.json()) as OpenApiDocument);
    })();
    contracts.set(origin, contract);
    contract.catch(() => contracts.delete(origin));
  }
  return contract;
}

/** Forgets the document of a service that stopped: another one may get its port. */
export function forgetContract(origin: string): void {
  contracts.delete(origin);
}

/**
 * `fetch` for requests to the service: every answer is checked against the service's OpenAPI
 * document (status declared, media type declared, JSON body valid), so a drift fails the test
 * that saw it. The returned response is unread; a streamed body (SSE) is never buffered.
 */
export async function apiFetch(url: string, init: RequestInit = {}): Promise<Response> {
  const contract = await contractOf(new URL(url).origin);
  const res = await fetch(url, init);
  const isJson = (res.headers.get('content-type') ?? '').startsWith('application/json');
  let text: Promise<string> | undefined;
  await contract.check(init.method ?? 'GET', url, {
    status: res.status,
    contentType: res.headers.get('content-type'),
    // Only JSON is read ahead (from a copy); other bodies are the caller's to read.
    body: () => (isJson ? (text ??= res.clone().text()) : Promise.resolve('')),
  });
  return res;
}
