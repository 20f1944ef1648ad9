import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    teardownTimeout: 30_000,
    reporters: ['default'],
    // GraphQL libraries must load the same `graphql` module instance as our code
    // (graphql refuses schemas from "another realm"), so vite processes them too.
    server: { deps: { inline: ['graphql-http', 'graphql-sse', 'graphql-query-complexity', /@escape\.tech\/graphql-armor/] } },
  },
});
