// Writes docs/errors.md from src/error-codes.ts: every error code, its exit code, what triggers
// it and how to fix it. `npm run errors:doc`; a unit test fails when the page is not what this
// renders (test/unit/error-codes.test.ts).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ERROR_CODES, type ErrorDomain } from '../src/error-codes.ts';
import { DOMAIN_EXIT } from '../src/errors.ts';

export const ERRORS_PAGE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../docs/errors.md');

const SECTIONS: readonly { domain: ErrorDomain; title: string }[] = [
  { domain: 'usage', title: 'Usage: the command line and the manifests given to `inject`' },
  { domain: 'config', title: 'Configuration: settings, files, and which cluster, namespace and identity' },
  { domain: 'api', title: "API: the API server's answers" },
  { domain: 'permission', title: 'Permission: credentials and RBAC' },
  { domain: 'internal', title: 'Internal' },
];

/** The page, from the table. */
export function renderErrorsReference(): string {
  const cell = (text: string) => text.replaceAll('|', '\\|');
  const lines = [
    '# Errors',
    '',
    'Every error config-sync reports prints a stable code, the message (what was wrong and where',
    'it came from) and a hint for the case at hand:',
    '',
    '```',
    'error CS_SCOPE_NO_NAMESPACE: no namespace from any source: no --namespace, no POD_NAMESPACE, ...',
    'hint: in a pod, set POD_NAMESPACE from the downward API (fieldRef: metadata.namespace); ...',
    '```',
    '',
    'The code sets the exit code: usage and configuration errors exit 2, API and permission errors',
    '3, internal ones 4 (drift is 1). `doctor` lists the same codes as problems. This page is',
    'generated from `src/error-codes.ts` (`npm run errors:doc`).',
  ];
  for (const { domain, title } of SECTIONS) {
    const codes = Object.entries(ERROR_CODES).filter(([, info]) => info.domain === domain);
    lines.push(
      '',
      `## ${title}`,
      '',
      `Exit code ${DOMAIN_EXIT[domain]}.`,
      '',
      '| code | when | fix |',
      '|---|---|---|',
    );
    for (const [code, info] of codes) lines.push(`| \`${code}\` | ${cell(info.when)} | ${cell(info.fix)} |`);
  }
  return `${lines.join('\n')}\n`;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  fs.writeFileSync(ERRORS_PAGE, renderErrorsReference());
  console.log(`wrote ${path.relative(process.cwd(), ERRORS_PAGE)}`);
}
