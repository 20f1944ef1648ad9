import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import semver from 'semver';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.js';
import { projectRoot } from '../../src/project-root.js';
import { retryDelay } from '../../src/webhooks/retry-policy.js';

const root = projectRoot();
const readme = readFileSync(join(root, 'README.md'), 'utf8');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { engines: { node: string } };
const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as {
  packages: Record<string, { engines?: { node?: string } | string[] }>;
};

describe('the README states what the code does', () => {
  it('gives the development ADMIN_TOKEN the configuration falls back to', () => {
    const token = parseConfig({ NODE_ENV: 'development' }).ADMIN_TOKEN;
    expect(readme).toContain(`development \`ADMIN_TOKEN\` is \`${token}\``);
    expect(readme).toContain(`| \`ADMIN_TOKEN\` | \`${token}\` outside production;`);
  });

  it('states the webhook retry jitter retryDelay applies', () => {
    const fiveMinutes = [0, 60_000, 300_000];
    expect(retryDelay(fiveMinutes, 2, undefined, () => 0)).toBe(270_000);
    expect(retryDelay(fiveMinutes, 2, undefined, () => 1)).toBe(330_000);
    expect(readme).toContain('±10% random jitter (a retry due in 5 min comes between 4 min 30 s and\n5 min 30 s)');
  });

  /**
   * Declared for Node 22 and later, but none of their own server code runs here: the GraphQL
   * explorer only serves Ruru's prebuilt browser bundle through `ruru/static`, which needs
   * nothing but node:zlib and node:util (test/portal/explorers.test.ts runs it on Node 20).
   */
  const NODE_CODE_NEVER_RUN = new Set(['node_modules/ruru', 'node_modules/ruru-types', 'node_modules/graphile-config']);

  /**
   * Declared for Node 22 and later, and run on 20 by the suite: the NATS client's id generator
   * needs only `globalThis.crypto.getRandomValues` (Node 19 and later), and every NATS
   * destination test (test/destinations/nats.test.ts) publishes through it on the Node 20 CI runs.
   */
  const RUN_ON_NODE_20_BY_THE_SUITE = new Set(['node_modules/@nats-io/nuid']);

  it('states the Node versions `engines` admits, and every locked dependency accepts the lowest of each line', () => {
    expect(readme).toContain(`\`engines\` admits Node \`${pkg.engines.node}\``);
    const lowest = pkg.engines.node.split('||').map((r) => semver.minVersion(r.trim())!.version);
    expect(lowest).toEqual(['20.19.0', '22.13.0', '24.0.0']);
    const refusing = Object.entries(lock.packages).flatMap(([name, p]) => {
      const range = !p.engines || Array.isArray(p.engines) ? undefined : p.engines.node;
      if (!name || !range || NODE_CODE_NEVER_RUN.has(name) || RUN_ON_NODE_20_BY_THE_SUITE.has(name)) return [];
      return lowest.filter((v) => !semver.satisfies(v, range)).map((v) => `${name} (${range}) refuses ${v}`);
    });
    expect(refusing).toEqual([]);
  });
});
