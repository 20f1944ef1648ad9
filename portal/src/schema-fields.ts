/** How the portal draws a form field from the JSON Schema the build generates from the service's zod schemas. */
export interface PropertySchema {
  type?: string;
  pattern?: string;
  format?: string;
  writeOnly?: boolean;
  enum?: string[];
  description?: string;
  default?: unknown;
  const?: unknown;
}
export interface ObjectSchema {
  properties?: Record<string, PropertySchema>;
  required?: string[];
}

/** HTML's `pattern` is anchored and compiled with the v flag; the schema's are anchored already. */
export function jsPattern(pattern: string): string | undefined {
  const inner = pattern.replace(/^\^/, '').replace(/\$$/, '');
  try {
    new RegExp(`^(?:${inner})$`, 'v');
    return inner;
  } catch {
    return undefined;
  }
}

/** `api_base_url` → "API base URL": config keys as words. */
export function fieldLabel(key: string): string {
  const words = key.split('_').map((w) => (/^(api|url|id|smtp|imap|sms)$/.test(w) ? w.toUpperCase() : w));
  const text = words.join(' ');
  return text.charAt(0).toUpperCase() + text.slice(1);
}
