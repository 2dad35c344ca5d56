// Drops the properties whose value is undefined. With exactOptionalPropertyTypes an optional
// property may be absent but not undefined, and Node's option objects are typed that way.
export function definedOnly<T extends object>(o: T): { [K in keyof T]?: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as {
    [K in keyof T]?: Exclude<T[K], undefined>;
  };
}
