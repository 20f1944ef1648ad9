import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { RE2JS } from 're2js';
import { z } from 'zod';
import { bumpStamp, type ChangeStamps } from '../change-stamps.js';
import type { Sql } from '../db.js';
import { fail, ok, type ErrorDetail, type Result } from '../errors.js';

// ajv-formats is CommonJS; under NodeNext its default export arrives wrapped.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (ajv: Ajv) => Ajv;

export const EVENT_TYPE_RE = /^[a-z0-9_.]+$/;

export const eventSchemaInput = z.strictObject({
  name: z.string().min(1).max(200).regex(EVENT_TYPE_RE, 'must match ^[a-z0-9_.]+$'),
  description: z.string().max(2000).nullish(),
  json_schema: z.record(z.string(), z.unknown()),
  enforce_validation: z.boolean().default(false),
});
export type EventSchemaInput = z.infer<typeof eventSchemaInput>;
export const eventSchemaPatch = eventSchemaInput.partial().refine((v) => Object.keys(v).length > 0, 'nothing to update');

export interface EventSchemaRecord {
  id: string;
  name: string;
  description: string | null;
  json_schema: Record<string, unknown>;
  enforce_validation: boolean;
  created_at: Date;
  updated_at: Date;
}

/**
 * The regex engine of schema `pattern` and `patternProperties`: RE2 (re2js, pure JS), whose
 * matching time is linear in the input. Schemas are tenant input run on shared processes, and
 * JavaScript's backtracking engine took 101 s on `^(a+)+$` against 40 characters. Patterns RE2
 * cannot run (backreferences, lookaround) make the schema invalid when it is written.
 */
const linearRegExp = Object.assign(
  (pattern: string) => {
    const re = RE2JS.compile(pattern);
    return { test: (s: string) => re.test(s) };
  },
  { code: 're2js' },
);

/**
 * An Ajv instance of its own for every schema compiled: a schema's `$id` is registered in the
 * instance that compiles it, so a shared instance let one application `$ref` another's schema
 * (and read its field names from the errors), refused an `$id` another had taken, and made
 * enforcement depend on which schemas happened to be loaded first. Compiling is rare (cached
 * per schema version below); validating is the hot path.
 */
function newAjv(): Ajv {
  const ajv = new Ajv({ allErrors: true, useDefaults: true, strict: false, coerceTypes: false, code: { regExp: linearRegExp } });
  addFormats(ajv);
  return ajv;
}

/** Compiled schemas by version; bounded, since each holds its own Ajv instance. */
const compiled = new Map<string, ValidateFunction>();
const COMPILED_MAX = 1000;

/** Compiles a JSON Schema; a schema Ajv refuses is a VALIDATION_ERROR naming the problem. */
function compile(schema: Record<string, unknown>, cacheKey?: string): Result<ValidateFunction> {
  const hit = cacheKey ? compiled.get(cacheKey) : undefined;
  if (hit) return ok(hit);
  try {
    const fn = newAjv().compile(schema);
    if (cacheKey) {
      if (compiled.size >= COMPILED_MAX) compiled.delete(compiled.keys().next().value!);
      compiled.set(cacheKey, fn);
    }
    return ok(fn);
  } catch (err) {
    return fail('VALIDATION_ERROR', `Invalid JSON Schema: ${(err as Error).message}`, [
      { path: ['json_schema'], message: (err as Error).message },
    ]);
  }
}

function ajvDetails(errors: ErrorObject[] | null | undefined): ErrorDetail[] {
  return (errors ?? []).map((e) => {
    const path: (string | number)[] = [
      'payload',
      ...e.instancePath
        .split('/')
        .slice(1)
        .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~')),
    ];
    if (e.keyword === 'required') path.push((e.params as { missingProperty: string }).missingProperty);
    if (e.keyword === 'additionalProperties') path.push((e.params as { additionalProperty: string }).additionalProperty);
    const where = path.length > 1 ? path.slice(1).join('.') : 'payload';
    return {
      path,
      message: e.keyword === 'required' ? `${where} is required` : `${where} ${e.message ?? 'is invalid'}`,
      keyword: e.keyword,
    };
  });
}

const row = (sql: Sql) => sql`id, name, description, json_schema, enforce_validation, created_at, updated_at`;

export async function createEventSchema(sql: Sql, appId: string, input: EventSchemaInput): Promise<Result<EventSchemaRecord>> {
  const check = compile(input.json_schema);
  if (!check.ok) return check;
  const [created] = await sql<EventSchemaRecord[]>`
    WITH created AS (
      INSERT INTO event_schemas (app_id, name, description, json_schema, enforce_validation)
      VALUES (${appId}, ${input.name}, ${input.description ?? null}, ${sql.json(input.json_schema as never)}, ${input.enforce_validation})
      ON CONFLICT (app_id, name) DO NOTHING
      RETURNING ${row(sql)}
    ), stamp AS (${bumpStamp(sql, 'event-schemas', 'created')})
    SELECT * FROM created`;
  if (!created)
    return fail('CONFLICT', `An event schema named "${input.name}" already exists`, [{ path: ['name'], message: 'already exists' }]);
  return ok(created);
}

export async function listEventSchemas(sql: Sql, appId: string): Promise<EventSchemaRecord[]> {
  return sql<EventSchemaRecord[]>`SELECT ${row(sql)} FROM event_schemas WHERE app_id = ${appId} ORDER BY name`;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const notFound = (id: string) => fail('NOT_FOUND', `No event schema ${id}`);

export async function getEventSchema(sql: Sql, appId: string, id: string): Promise<Result<EventSchemaRecord>> {
  if (!UUID.test(id)) return notFound(id);
  const [found] = await sql<EventSchemaRecord[]>`SELECT ${row(sql)} FROM event_schemas WHERE app_id = ${appId} AND id = ${id}`;
  return found ? ok(found) : notFound(id);
}

export async function updateEventSchema(
  sql: Sql,
  appId: string,
  id: string,
  patch: Partial<EventSchemaInput>,
): Promise<Result<EventSchemaRecord>> {
  if (!UUID.test(id)) return notFound(id);
  if (patch.json_schema) {
    const check = compile(patch.json_schema);
    if (!check.ok) return check;
  }
  try {
    const [updated] = await sql<EventSchemaRecord[]>`
      WITH updated AS (
        UPDATE event_schemas SET
          name = COALESCE(${patch.name ?? null}, name),
          description = ${patch.description === undefined ? sql`description` : sql`${patch.description}`},
          json_schema = COALESCE(${patch.json_schema ? sql.json(patch.json_schema as never) : null}::jsonb, json_schema),
          enforce_validation = COALESCE(${patch.enforce_validation ?? null}, enforce_validation),
          updated_at = clock_timestamp()
        WHERE app_id = ${appId} AND id = ${id}
        RETURNING ${row(sql)}
      ), stamp AS (${bumpStamp(sql, 'event-schemas', 'updated')})
      SELECT * FROM updated`;
    return updated ? ok(updated) : notFound(id);
  } catch (err) {
    if ((err as { code?: string }).code === '23505') return fail('CONFLICT', `An event schema named "${patch.name}" already exists`);
    throw err;
  }
}

export async function deleteEventSchema(sql: Sql, appId: string, id: string): Promise<Result<true>> {
  if (!UUID.test(id)) return notFound(id);
  const rows = await sql`
    WITH deleted AS (DELETE FROM event_schemas WHERE app_id = ${appId} AND id = ${id} RETURNING id),
         stamp AS (${bumpStamp(sql, 'event-schemas', 'deleted')})
    SELECT id FROM deleted`;
  return rows.length ? ok(true) : notFound(id);
}

export interface PayloadCheck {
  /** The payload with the schema's `default` values applied. */
  payload: Record<string, unknown>;
  /** Problems found; null when it matched or no schema applies. */
  errors: ErrorDetail[] | null;
  enforced: boolean;
}

type SchemaRow = { id: string; json_schema: Record<string, unknown>; enforce_validation: boolean; updated_at: Date };

/**
 * Checks a payload against the application's schema for this event type, if there is one.
 * Lookups (also "no schema") are cached per process under the event-schemas change stamp.
 */
export async function checkPayload(
  sql: Sql,
  stamps: ChangeStamps,
  appId: string,
  eventType: string,
  payload: Record<string, unknown>,
): Promise<PayloadCheck> {
  const schema = await stamps.cache<SchemaRow | null>('event-schemas').get(`${appId}/${eventType}`, async () => {
    const [found] = await sql<SchemaRow[]>`
      SELECT id, json_schema, enforce_validation, updated_at FROM event_schemas WHERE app_id = ${appId} AND name = ${eventType}`;
    return found ?? null;
  });
  if (!schema) return { payload, errors: null, enforced: false };
  const fn = compile(schema.json_schema, `${schema.id}:${schema.updated_at.getTime()}`);
  if (!fn.ok) return { payload, errors: null, enforced: false };
  const copy = structuredClone(payload);
  const valid = fn.value(copy);
  return { payload: copy, errors: valid ? null : ajvDetails(fn.value.errors), enforced: schema.enforce_validation };
}
