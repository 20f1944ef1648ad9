/**
 * The one rule for a broker destination's address template (a RabbitMQ routing key, a NATS
 * subject): `{event_type}` and `{app_id}` are replaced, nothing else may be in braces.
 */
const PLACEHOLDER = /\{([^{}]*)\}/g;
const KNOWN = new Set(['event_type', 'app_id']);

/** True when `template` uses only the known placeholders and no stray brace. */
export const isTemplate = (template: string) =>
  [...template.matchAll(PLACEHOLDER)].every((m) => KNOWN.has(m[1])) && !/[{}]/.test(template.replace(PLACEHOLDER, ''));

export const TEMPLATE_MESSAGE = 'only {event_type} and {app_id} may be used';

/** The template filled in for one message. */
export const fillTemplate = (template: string, v: { eventType: string; appId: string }) =>
  template.replace(PLACEHOLDER, (_, name: string) => (name === 'event_type' ? v.eventType : v.appId));
