/**
 * The headers of the pages the service serves to browsers (the portal, the API reference, the
 * GraphQL explorer) and of their files. Every page runs scripts from this origin only and talks
 * to this origin only; each adds what its own code needs.
 */
const STRICT = [
  "default-src 'self'",
  "script-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
];

export function pageSecurityHeaders(directives: string[]): Record<string, string> {
  return {
    'Content-Security-Policy': [...STRICT, ...directives].join('; '),
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'no-referrer',
    'X-Frame-Options': 'DENY',
  };
}
