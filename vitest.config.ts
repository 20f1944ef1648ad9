import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The chaos run's short variant starts a whole cluster and takes minutes: CI runs it after
    // the suite, alone (`npm run test:chaos`, CHAOS=1), not beside the other files.
    exclude: process.env.CHAOS === '1' ? [] : ['test/reliability/chaos-short.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    pool: 'forks',
    // Test files share their worker process (each still gets its own database and Redis
    // prefix): with a fresh process per file, importing the service's module graph again in each
    // of ~100 files took more time than the tests (collect 38 s vs tests 56 s for ten files).
    isolate: false,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    teardownTimeout: 30_000,
    reporters: ['default'],
    // GraphQL libraries must load the same `graphql` module instance as our code
    // (graphql refuses schemas from "another realm"), so vite processes them too.
    server: { deps: { inline: ['graphql-http', 'graphql-sse', 'graphql-query-complexity', /@escape\.tech\/graphql-armor/] } },
  },
});
