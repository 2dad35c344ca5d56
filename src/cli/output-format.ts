import { badOutputFormat } from '../errors.ts';

export type OutputFormat = 'text' | 'json';
const formats: readonly OutputFormat[] = ['text', 'json'];

/** Validates `-o/--output`; absent means text. */
export function parseOutputFormat(value: string | undefined): OutputFormat {
  if (value === undefined) return 'text';
  if ((formats as readonly string[]).includes(value)) return value as OutputFormat;
  throw badOutputFormat(value, formats);
}
