import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CONSOLE_GUIDE } from '../../src/platforms/console-guide.js';
import { configKeys, renderPlatformDocs } from '../../src/platforms/platform-docs.js';
import { ADAPTERS } from '../../src/platforms/registry.js';
import { PLATFORM_NAMES } from '../../src/platforms/types.js';
import { projectRoot } from '../../src/project-root.js';

describe('docs/platforms.md', () => {
  it('is what `npm run docs:platforms` writes from the config schemas and the console guide', () => {
    expect(
      readFileSync(join(projectRoot(), 'docs/platforms.md'), 'utf8'),
      'run `npm run docs:platforms` and commit docs/platforms.md',
    ).toBe(renderPlatformDocs());
  });

  it("tells where to find every config key of every platform, and only the schema's keys", () => {
    for (const name of PLATFORM_NAMES) {
      const keys = configKeys(name).map((k) => k.key);
      expect(keys.length, name).toBeGreaterThan(0);
      expect(Object.keys(CONSOLE_GUIDE[name].fields).sort(), name).toEqual([...keys].sort());
      for (const text of Object.values(CONSOLE_GUIDE[name].fields as Record<string, string>)) expect(text.length, name).toBeGreaterThan(10);
    }
  });

  it('marks each key the adapter keeps sealed as secret, and requires what the schema requires', () => {
    const telegram = configKeys('TELEGRAM');
    expect(telegram.find((k) => k.key === 'bot_token')).toMatchObject({ required: true, secret: true });
    expect(telegram.find((k) => k.key === 'bot_username')).toMatchObject({ required: false, secret: false });
    for (const name of PLATFORM_NAMES)
      expect(
        configKeys(name)
          .filter((k) => k.secret)
          .map((k) => k.key)
          .sort(),
        name,
      ).toEqual([...ADAPTERS[name].secretFields].sort());
    // A config the schema refuses without a key documents that key as required.
    expect(ADAPTERS.DISCORD.configSchema.safeParse({ bot_token: 't', public_key: 'ab'.repeat(32) }).success).toBe(false);
    expect(configKeys('DISCORD').find((k) => k.key === 'application_id')?.required).toBe(true);
  });
});
