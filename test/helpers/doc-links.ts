import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import GithubSlugger from 'github-slugger';
import MarkdownIt, { type Token } from 'markdown-it';

/**
 * The link check of the project's Markdown (test/foundation/doc-links.test.ts): every link
 * must stay inside the repository and land — a relative link on a file or folder that
 * exists, an anchor on a heading (GitHub's slug) or an explicit `id`/`name` of its target.
 * Links to the running service on localhost are allowed: they are the service's own pages.
 */

// Bare URLs count as links, as GitHub renders them; "README.md" and other file names must not.
const md = new MarkdownIt({ html: true, linkify: true });
md.linkify.set({ fuzzyLink: false, fuzzyEmail: false });

const SCHEME = /^[a-z][a-z0-9+.-]*:/i;
const OWN_SERVICE = /^https?:\/\/(localhost|127\.0\.0\.1)(:\d+)?(\/|$)/;
const HTML_TARGET = /\b(?:href|src)\s*=\s*["']([^"']+)["']/g;
const HTML_ANCHOR = /\b(?:id|name)\s*=\s*["']([^"']+)["']/g;

export interface LinkProblem {
  file: string;
  link: string;
  problem: string;
}

/** Every Markdown file of the repository, relative to `root`, outside installed and built trees. */
export function markdownFiles(root: string): string[] {
  const skip = new Set(['node_modules', 'dist', '.git', 'coverage']);
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.isDirectory()) {
        if (!skip.has(entry.name)) walk(join(dir, entry.name));
      } else if (entry.name.endsWith('.md')) found.push(relative(root, join(dir, entry.name)));
    }
  };
  walk(root);
  return found.sort();
}

function tokenLinks(tokens: Token[], into: string[]): void {
  for (const t of tokens) {
    if (t.type === 'link_open') into.push(String(t.attrGet('href') ?? ''));
    if (t.type === 'image') into.push(String(t.attrGet('src') ?? ''));
    if (t.type === 'html_inline' || t.type === 'html_block') for (const m of t.content.matchAll(HTML_TARGET)) into.push(m[1]);
    if (t.children) tokenLinks(t.children, into);
  }
}

/** The targets a Markdown text links to, in order (code spans and blocks are not links). */
function linksOf(markdown: string): string[] {
  const links: string[] = [];
  tokenLinks(md.parse(markdown, {}), links);
  return links;
}

/** The anchors a Markdown text offers: GitHub's slug of each heading, and HTML ids and names. */
export function anchorsOf(markdown: string): Set<string> {
  const slugger = new GithubSlugger();
  const anchors = new Set<string>();
  const tokens = md.parse(markdown, {});
  tokens.forEach((t, i) => {
    if (t.type === 'heading_open') {
      const text = (tokens[i + 1].children ?? [])
        .filter((c) => c.type === 'text' || c.type === 'code_inline')
        .map((c) => c.content)
        .join('');
      anchors.add(slugger.slug(text));
    }
    if (t.type === 'html_inline' || t.type === 'html_block') for (const m of t.content.matchAll(HTML_ANCHOR)) anchors.add(m[1]);
    for (const c of t.children ?? []) if (c.type === 'html_inline') for (const m of c.content.matchAll(HTML_ANCHOR)) anchors.add(m[1]);
  });
  return anchors;
}

/**
 * What is wrong with the links of `files` (paths relative to `root`); `read` supplies a file's
 * text, so tests can check documents that are not on disk.
 */
export function linkProblems(root: string, files: string[], read: (file: string) => string | undefined = readAt(root)): LinkProblem[] {
  const problems: LinkProblem[] = [];
  const anchorCache = new Map<string, Set<string>>();
  const anchors = (file: string) => {
    if (!anchorCache.has(file)) anchorCache.set(file, anchorsOf(read(file) ?? ''));
    return anchorCache.get(file)!;
  };
  for (const file of files) {
    for (const link of linksOf(read(file) ?? '')) {
      const report = (problem: string) => problems.push({ file, link, problem });
      if (OWN_SERVICE.test(link)) continue;
      if (SCHEME.test(link) || link.startsWith('//')) {
        report('leaves the repository');
        continue;
      }
      const [rawPath, anchor] = splitAnchor(link);
      const path = decodeURIComponent(rawPath);
      const target = path === '' ? file : relative(root, resolve(root, path.startsWith('/') ? `.${path}` : join(dirname(file), path)));
      if (target === '..' || target.startsWith(`..${sep}`)) {
        report('leaves the repository');
        continue;
      }
      if (read(target) === undefined && !isDirectory(join(root, target))) {
        report(`${target} does not exist`);
        continue;
      }
      if (anchor !== undefined && target.endsWith('.md') && !anchors(target).has(decodeURIComponent(anchor)))
        report(`${target} has no heading or id "${anchor}"`);
    }
  }
  return problems;
}

function splitAnchor(link: string): [string, string | undefined] {
  const i = link.indexOf('#');
  return i < 0 ? [link, undefined] : [link.slice(0, i), link.slice(i + 1)];
}

function readAt(root: string) {
  return (file: string): string | undefined => {
    const path = join(root, file);
    if (!existsSync(path) || statSync(path).isDirectory()) return undefined;
    return file.endsWith('.md') ? readFileSync(path, 'utf8') : '';
  };
}

function isDirectory(path: string): boolean {
  return existsSync(path) && statSync(path).isDirectory();
}
