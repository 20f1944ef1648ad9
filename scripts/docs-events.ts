/** Writes docs/events.md from the event catalog (src/ledger/event-types.ts). */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { renderEventDocs } from '../src/ledger/event-docs.js';
import { projectRoot } from '../src/project-root.js';

writeFileSync(join(projectRoot(), 'docs/events.md'), renderEventDocs());
