/**
 * A Postgres array literal, every element quoted (so commas, braces and quotes in a path are data):
 * a batch's column as one parameter, so a statement's text is the same whatever the batch's size.
 */
export function arrayLiteral(values: Array<string | number | Date | null | undefined>): string {
  return `{${values.map(value => (value == null ? 'NULL' : `"${String(value).replace(/[\\"]/g, match => `\\${match}`)}"`)).join(',')}}`
}
