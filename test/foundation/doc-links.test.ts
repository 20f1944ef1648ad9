import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/project-root.js';
import { anchorsOf, linkProblems, markdownFiles } from '../helpers/doc-links.js';

const root = projectRoot();

describe('the documentation stands alone', () => {
  it('links only inside the repository, to files and headings that exist', () => {
    const files = markdownFiles(root);
    expect(files).toEqual(expect.arrayContaining(['README.md', 'CONTRIBUTING.md', 'docs/README.md', 'docs/guide.md']));
    expect(linkProblems(root, files)).toEqual([]);
  });

  it('names no file of the workplace around the repository', () => {
    const mentions = markdownFiles(root).filter((f) =>
      /\.\.\/shared\/|\b(SPEC|DESIGN|STYLE|PLATFORMS)\.md\b|smoke\.mjs|`duplicates\b/.test(readFileSync(join(root, f), 'utf8')),
    );
    expect(mentions).toEqual([]);
  });
});

describe('the link check', () => {
  const docs: Record<string, string> = {
    'README.md': '# Gateway\n\nSee [the guide](docs/guide.md#streams-sse-and-graphql) and [setup](#set-up-and-run).\n\n## Set up and run\n',
    'docs/guide.md':
      '# Guide\n\n## Streams: SSE and GraphQL\n\n<a id="casing"></a>Back to [the README](../README.md), [casing](#casing).\n',
  };
  const check = (extra: Record<string, string>) => {
    const all = { ...docs, ...extra };
    return linkProblems('/repo', Object.keys(extra), (f) => all[f]);
  };

  it('passes links to files, headings and HTML ids that exist, and to the local service', () => {
    expect(
      check({ 'docs/ok.md': '[a](guide.md) [b](../README.md#set-up-and-run) [c](guide.md#casing) http://localhost:3000/portal' }),
    ).toEqual([]);
    expect(linkProblems('/repo', Object.keys(docs), (f) => docs[f])).toEqual([]);
  });

  it('fails a relative link to a file that does not exist', () => {
    expect(check({ 'docs/bad.md': 'See [ops](OPERATION.md).' })).toEqual([
      { file: 'docs/bad.md', link: 'OPERATION.md', problem: 'docs/OPERATION.md does not exist' },
    ]);
  });

  it('fails an anchor no heading or id of its target has', () => {
    expect(check({ 'docs/bad.md': '[x](../README.md#quick-start) [y](#nowhere)' }).map((p) => p.problem)).toEqual([
      'README.md has no heading or id "quick-start"',
      'docs/bad.md has no heading or id "nowhere"',
    ]);
  });

  it('fails a link that leaves the repository: a URL, a bare URL, or a path above the root', () => {
    const problems = check({ 'docs/bad.md': '[spec](../../shared/SPEC.md), [site](https://example.com/x), see https://example.org.' });
    expect(problems.map((p) => [p.link, p.problem])).toEqual([
      ['../../shared/SPEC.md', 'leaves the repository'],
      ['https://example.com/x', 'leaves the repository'],
      ['https://example.org', 'leaves the repository'],
    ]);
  });

  it('slugs headings as GitHub does: code spans kept, punctuation dropped, repeats numbered', () => {
    expect([...anchorsOf('## Queue shards (`QUEUE_SHARDS`)\n## 7. Try it: `npm run dev:cluster`\n## A\n## A\n')]).toEqual([
      'queue-shards-queue_shards',
      '7-try-it-npm-run-devcluster',
      'a',
      'a-1',
    ]);
  });
});
