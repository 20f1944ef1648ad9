/** Writes docs/platforms.md from the platforms' config schemas and src/platforms/console-guide.ts. */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { renderPlatformDocs } from '../src/platforms/platform-docs.js';
import { projectRoot } from '../src/project-root.js';

writeFileSync(join(projectRoot(), 'docs/platforms.md'), renderPlatformDocs());
