// The streams a command writes to. Passed in rather than taken from `process`, so commands can be
// run in-process by tests and their output read back.
export interface CliIO {
  readonly stdout: { write(chunk: string): unknown };
  readonly stderr: { write(chunk: string): unknown };
}
