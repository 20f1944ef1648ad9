import { randomUUID } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApplication } from '../../src/apps/applications.js';
import { createSql, type Sql } from '../../src/db.js';
import { renderEventDocs } from '../../src/ledger/event-docs.js';
import {
  EVENT_ALIASES,
  eventAlias,
  RESERVED_PREFIXES,
  SYSTEM_EVENTS,
  systemEvent,
  type SystemEventType,
} from '../../src/ledger/event-types.js';
import { projectRoot } from '../../src/project-root.js';
import { offCatalogEvents } from '../helpers/event-audit.js';
import { createTestEnv, type TestEnv } from '../helpers/stack.js';

const root = projectRoot();
const CATALOG = 'src/ledger/event-types.ts';
const TYPES = Object.keys(SYSTEM_EVENTS) as SystemEventType[];

/**
 * A system type as a value: a whole literal under a system prefix (`'message.inbound'`), or
 * one quoted inside a literal's text (SQL's `event_type = 'message.inbound'`). Prose that
 * mentions a type (an OpenAPI summary, a GraphQL description) is not a value.
 */
const prefixes = [...new Set([...RESERVED_PREFIXES.map((p) => p.slice(0, -1)), ...TYPES.map((t) => t.split('.')[0])])];
const NAME = `(?:${prefixes.join('|')})\\.[a-z0-9_]+`;
const WHOLE = new RegExp(`^(${NAME})$`);
const QUOTED = new RegExp(`['"](${NAME})['"]`, 'g');
const systemNamesIn = (text: string) => (WHOLE.test(text) ? [text] : [...text.matchAll(QUOTED)].map((m) => m[1]));

interface Literal {
  file: string;
  line: number;
  text: string;
  /** The catalog function or type it is an argument of, if any (where the compiler checks it). */
  catalogUse?: string;
}

function sourceFiles(): string[] {
  return ['src', 'workers'].flatMap((dir) =>
    readdirSync(join(root, dir), { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.ts'))
      .map((f) => `${dir}/${f}`),
  );
}

/** Every string and template literal naming a system type, in every file but the catalog. */
function systemLiterals(): Literal[] {
  const found: Literal[] = [];
  for (const file of sourceFiles().filter((f) => f !== CATALOG)) {
    const source = ts.createSourceFile(file, readFileSync(join(root, file), 'utf8'), ts.ScriptTarget.Latest, true);
    const fromCatalog = new Set<string>();
    // An argument of a catalog function (`systemEvent('message.inbound', …)`) or of a catalog
    // type (`SystemEventPayload<'message.inbound'>`): the compiler checks it against the catalog.
    const catalogUse = (node: ts.Node): string | undefined => {
      const p = node.parent;
      if (
        ts.isCallExpression(p) &&
        p.arguments.includes(node as ts.Expression) &&
        ts.isIdentifier(p.expression) &&
        fromCatalog.has(p.expression.text)
      )
        return p.expression.text;
      const ref = ts.isLiteralTypeNode(p) ? p.parent : undefined;
      if (ref && ts.isTypeReferenceNode(ref) && ts.isIdentifier(ref.typeName) && fromCatalog.has(ref.typeName.text))
        return ref.typeName.text;
      return undefined;
    };
    const visit = (node: ts.Node): void => {
      if (
        ts.isImportDeclaration(node) &&
        ts.isStringLiteral(node.moduleSpecifier) &&
        node.moduleSpecifier.text.endsWith('ledger/event-types.js')
      ) {
        const named = node.importClause?.namedBindings;
        if (named && ts.isNamedImports(named)) for (const n of named.elements) fromCatalog.add(n.name.text);
      }
      if (
        ts.isStringLiteral(node) ||
        ts.isNoSubstitutionTemplateLiteral(node) ||
        ts.isTemplateHead(node) ||
        ts.isTemplateMiddle(node) ||
        ts.isTemplateTail(node)
      ) {
        for (const text of systemNamesIn(node.text)) {
          found.push({ file, line: source.getLineAndCharacterOfPosition(node.getStart()).line + 1, text, catalogUse: catalogUse(node) });
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return found;
}

/** One input per type: a type added to the catalog without one does not compile. */
const SAMPLES: { [T in SystemEventType]: Parameters<(typeof SYSTEM_EVENTS)[T]['build']>[] } = {
  'message.inbound': [
    [
      {
        message: { text: 'hi', role: 'user', type: 'text' },
        platform: 'telegram',
        external_message_id: '1:2',
        conversation_id: randomUUID(),
        timestamp: '2024-01-01T00:00:00.000Z',
        edited: false,
      },
    ],
    [
      {
        message: {
          text: '',
          role: 'user',
          type: 'voice',
          media: { id: randomUUID(), mime_type: 'audio/ogg', url: '/v1/files/x/content' },
          transcription: { status: 'completed', language: 'english', duration_ms: 5 },
          transcript: 'ring me',
          subject: 'platform-specific fields stay',
        },
        platform: 'email',
        external_message_id: '<a@b>',
        conversation_id: randomUUID(),
        timestamp: '2024-01-01T00:00:00.000Z',
        edited: true,
      },
    ],
  ],
  'message.outbound': [[{ text: 'hello', platform: 'slack', external_message_id: 'C1:1.2', conversation_id: randomUUID() }]],
  'message.status': [
    [
      {
        kind: 'platform',
        status: 'read',
        external_message_id: 'wamid.1',
        origin_event_id: null,
        platform: 'whatsapp',
        timestamp: '2024-01-01T00:00:00Z',
      },
    ],
    [
      {
        kind: 'platform',
        status: 'failed',
        external_message_id: 'wamid.2',
        origin_event_id: randomUUID(),
        platform: 'whatsapp',
        timestamp: '2024-01-01T00:00:00Z',
        error: { code: 131047 },
      },
    ],
    [
      {
        kind: 'send_failed',
        message_id: randomUUID(),
        platform: 'telegram',
        error: { code: 'RECIPIENT_BLOCKED', message: 'blocked', platform_code: 403 },
        conversation_id: randomUUID(),
      },
    ],
  ],
  'message.reaction': [
    [
      {
        reaction: { emoji: '👍', message_id: '1:2' },
        action: 'added',
        platform: 'telegram',
        conversation_id: randomUUID(),
        origin_event_id: null,
        timestamp: '2024-01-01T00:00:00Z',
      },
    ],
  ],
  'user.merged': [
    [{ target_user_id: randomUUID(), source_user_id: randomUUID(), platform_user_ids: [randomUUID()], link_code_id: null }],
    [{ target_user_id: randomUUID(), source_user_id: randomUUID(), platform_user_ids: [], link_code_id: randomUUID() }],
  ],
  'link_code.generated': [[{ link_code_id: randomUUID(), user_id: randomUUID(), expires_at: '2024-01-01T00:10:00.000000Z' }]],
  'link_code.activation': [
    [{ link_code_id: randomUUID(), user_id: randomUUID(), platform_user_id: randomUUID(), merged_user_id: null, via: 'inbound' }],
  ],
  'system.webhook_disabled': [
    [
      {
        subscription_id: randomUUID(),
        name: 'orders',
        target_url: 'https://example.org/hook',
        consecutive_failures: 5,
        disabled_at: '2024-01-01T00:00:00.000Z',
      },
    ],
  ],
  'webhook.test': [[]],
};

describe('the event catalog', () => {
  it('is the only place a system event type is spelled out: elsewhere only as an argument of a catalog function', () => {
    const literals = systemLiterals();
    // The scan sees the writers' type arguments; if it saw nothing it would prove nothing.
    expect(literals.filter((l) => l.catalogUse === 'systemEvent').length).toBeGreaterThanOrEqual(TYPES.length);
    const loose = literals.filter((l) => !l.catalogUse).map((l) => `${l.file}:${l.line} ${l.text}`);
    expect(loose, `build system events with systemEvent() from ${CATALOG}; name a type with systemEventType()`).toEqual([]);
  });

  it('names every file that builds a system event as its emitter, and only files that exist', () => {
    const built = new Map<string, Set<string>>();
    for (const l of systemLiterals().filter((x) => x.catalogUse === 'systemEvent'))
      built.set(l.text, (built.get(l.text) ?? new Set()).add(l.file));
    for (const type of TYPES) {
      const named = SYSTEM_EVENTS[type].emittedBy.map((e) => e.file).sort();
      expect([...(built.get(type) ?? [])].sort(), `emittedBy of ${type}`).toEqual(named);
      for (const file of named) expect(existsSync(join(root, file)), file).toBe(true);
    }
  });

  it('reserves a prefix for every type it stores, so no client can post one as a custom event', () => {
    for (const [type, def] of Object.entries(SYSTEM_EVENTS)) {
      if (def.stored !== false)
        expect(
          RESERVED_PREFIXES.some((p) => type.startsWith(p)),
          type,
        ).toBe(true);
    }
  });

  it('builds payloads that parse against their own schemas, with optional fields left out rather than undefined', () => {
    for (const type of TYPES) {
      for (const input of SAMPLES[type]) {
        const built = (systemEvent as (t: string, ...i: unknown[]) => { event_type: string; payload: Record<string, unknown> })(
          type,
          ...input,
        );
        expect(built.event_type).toBe(type);
        const parsed = SYSTEM_EVENTS[type].payload.safeParse(built.payload);
        expect(parsed.error, `${type} ${JSON.stringify(built.payload)}`).toBeUndefined();
        expect(Object.values(built.payload)).not.toContain(undefined);
      }
    }
  });

  it('keeps the payloads clients already read, field for field', () => {
    const conversation = randomUUID();
    expect(
      systemEvent('message.outbound', { text: 'hi', platform: 'telegram', external_message_id: '9', conversation_id: conversation })
        .payload,
    ).toStrictEqual({
      message: { text: 'hi', role: 'assistant' },
      platform: 'telegram',
      external_message_id: '9',
      conversation_id: conversation,
      status: 'sent',
    });
    const message = { text: 'a', role: 'user' as const, type: 'text' as const };
    const inbound = { message, platform: 'sms', external_message_id: 'SM1', conversation_id: conversation, timestamp: 't' };
    expect(systemEvent('message.inbound', { ...inbound, edited: false }).payload).toStrictEqual(inbound);
    expect(JSON.stringify(systemEvent('message.inbound', { ...inbound, edited: true }).payload)).toBe(
      JSON.stringify({ ...inbound, edited: true }),
    );
    const status = { status: 'delivered' as const, external_message_id: 'x', origin_event_id: null, platform: 'whatsapp', timestamp: 't' };
    expect(systemEvent('message.status', { kind: 'platform', ...status }).payload).toStrictEqual(status);
    expect(
      systemEvent('user.merged', { target_user_id: 'a', source_user_id: 'b', platform_user_ids: [], link_code_id: null }).payload,
    ).toStrictEqual({
      target_user_id: 'a',
      source_user_id: 'b',
      platform_user_ids: [],
    });
    expect(systemEvent('webhook.test').payload).toStrictEqual({ message: 'Test delivery from the messaging gateway' });
  });

  it("gives the API's second names from the payload: a status's own name, an inbound's platform form", () => {
    const status = (st: 'sent' | 'delivered' | 'read' | 'failed') =>
      eventAlias(
        systemEvent('message.status', {
          kind: 'platform',
          status: st,
          external_message_id: 'x',
          origin_event_id: null,
          platform: 'whatsapp',
          timestamp: 't',
        }),
      );
    expect([status('sent'), status('delivered'), status('read'), status('failed')]).toEqual([
      null,
      'message.delivered',
      'message.read',
      'message.failed',
    ]);
    const failedSend = systemEvent('message.status', {
      kind: 'send_failed',
      message_id: randomUUID(),
      platform: 'telegram',
      error: { code: 'RECIPIENT_BLOCKED', message: 'blocked' },
      conversation_id: randomUUID(),
    });
    expect(eventAlias(failedSend)).toBe('message.failed');
    const message = { text: 'a', role: 'user' as const, type: 'text' as const };
    const inbound = { message, external_message_id: '1', conversation_id: randomUUID(), timestamp: 't', edited: false };
    expect(eventAlias(systemEvent('message.inbound', { ...inbound, platform: 'telegram' }))).toBe('message.telegram.inbound');
    expect(eventAlias(systemEvent('message.inbound', { ...inbound, platform: 'email' }))).toBe('message.email.inbound');
    // Only documented names are stored: a payload off its schema, or a custom type, gets none.
    expect(eventAlias({ event_type: 'message.inbound', payload: { platform: 'myspace' } })).toBeNull();
    expect(eventAlias({ event_type: 'message.status', payload: { status: 'read' } })).toBe('message.read');
    expect(eventAlias({ event_type: 'order.read', payload: { status: 'read' } })).toBeNull();
  });

  it('never names an alias like a stored type, and keeps every alias under a reserved prefix', () => {
    // A listing looks a name up in one column: an alias that was also a type would be ambiguous.
    for (const [name, type] of EVENT_ALIASES) {
      expect(Object.hasOwn(SYSTEM_EVENTS, name), name).toBe(false);
      expect(
        RESERVED_PREFIXES.some((p) => name.startsWith(p)),
        name,
      ).toBe(true);
      expect(Object.hasOwn(SYSTEM_EVENTS, type), type).toBe(true);
    }
    // The API's names that are not stored types (docs/events.md).
    for (const name of ['message.delivered', 'message.read', 'message.failed', 'message.telegram.inbound'])
      expect(EVENT_ALIASES.has(name), name).toBe(true);
  });

  it('generates docs/events.md: the committed file is what `npm run docs:events` writes', () => {
    expect(readFileSync(join(root, 'docs/events.md'), 'utf8'), 'run `npm run docs:events` and commit docs/events.md').toBe(
      renderEventDocs(),
    );
  });
});

describe('the catalog check every test stack runs on close', () => {
  let t: TestEnv;
  let sql: Sql;
  let appId: string;

  beforeAll(async () => {
    t = await createTestEnv();
    sql = createSql(t.config.DATABASE_URL);
    appId = (await createApplication(sql, 'audit', ['events:read'])).appId;
  });
  afterAll(async () => {
    await sql.end();
    await t.dropDatabase();
  });

  const store = (id: string, eventType: string, payload: object) =>
    sql`INSERT INTO events (id, app_id, seq, created_at, event_type, payload)
        SELECT ${id}, ${appId}, COALESCE(max(seq), 0) + 1, now(), ${eventType}, ${sql.json(payload as never)} FROM events WHERE app_id = ${appId}`;

  it('passes catalog-built system events and any custom event, even one named like a delivery-only type', async () => {
    const built = systemEvent('link_code.activation', {
      link_code_id: randomUUID(),
      user_id: randomUUID(),
      platform_user_id: randomUUID(),
      merged_user_id: null,
      via: 'api',
    });
    await store(randomUUID(), built.event_type, built.payload);
    await store(randomUUID(), 'order.placed', { anything: ['goes'] });
    // Not reserved, so a client may post it; the service only ever delivers its own.
    await store(randomUUID(), 'webhook.test', { a: 1 });
    expect(await offCatalogEvents(sql)).toEqual([]);
  });

  it("gives rows written before the aliases existed the writer's alias (the migration's backfill)", async () => {
    const message = { text: 'a', role: 'user' as const, type: 'text' as const };
    const built = [
      ...(['sent', 'delivered', 'read', 'failed'] as const).map((status) =>
        systemEvent('message.status', {
          kind: 'platform',
          status,
          external_message_id: 'x',
          origin_event_id: null,
          platform: 'sms',
          timestamp: 't',
        }),
      ),
      systemEvent('message.status', {
        kind: 'send_failed',
        message_id: randomUUID(),
        platform: 'slack',
        error: { code: 'X', message: 'x' },
        conversation_id: randomUUID(),
      }),
      ...['telegram', 'whatsapp', 'messenger', 'instagram', 'slack', 'discord', 'sms', 'email'].map((platform) =>
        systemEvent('message.inbound', {
          message,
          platform,
          external_message_id: '1',
          conversation_id: randomUUID(),
          timestamp: 't',
          edited: false,
        }),
      ),
      systemEvent('link_code.generated', { link_code_id: randomUUID(), user_id: randomUUID(), expires_at: 't' }),
      { event_type: 'order.placed', payload: { status: 'read', platform: 'telegram' } },
    ];
    const ids = built.map(() => randomUUID());
    for (const [i, e] of built.entries()) await store(ids[i], e.event_type, e.payload);
    const migration = readFileSync(join(root, 'migrations/1700000000082_event_aliases.sql'), 'utf8');
    const backfill = migration.split('-- Down Migration')[0].match(/^UPDATE events [^;]+;/gm)!;
    expect(backfill.length).toBeGreaterThan(0);
    for (const statement of backfill) await sql.unsafe(statement);
    const rows = await sql<{ id: string; event_alias: string | null }[]>`SELECT id, event_alias FROM events WHERE id = ANY(${ids}::uuid[])`;
    const byId = new Map(rows.map((r) => [r.id, r.event_alias]));
    expect(ids.map((id) => byId.get(id))).toEqual(built.map((e) => eventAlias(e)));
  });

  it('reports a system event whose payload breaks its schema, and a reserved-prefix type the catalog lacks', async () => {
    const bad = randomUUID();
    const unknown = randomUUID();
    await store(bad, 'message.outbound', { message: { text: 'hi', role: 'assistant' }, external_message_id: 'x', extra_field: 1 });
    await store(unknown, 'message.edited', {});
    const found = await offCatalogEvents(sql);
    expect(found).toHaveLength(2);
    expect(found[0]).toMatch(new RegExp(`^message\\.outbound ${bad}: .*(platform|extra_field)`));
    expect(found[1]).toBe(`message.edited ${unknown}: not a type of the catalog (src/ledger/event-types.ts)`);
  });
});
