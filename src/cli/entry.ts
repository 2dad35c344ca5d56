// Process entry point of the bundled CLI (dist/config-sync.js). The only place that touches
// `process` for argv, streams and the exit code.
import { runCli } from './main.ts';

process.exitCode = await runCli(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr });
