/** A zod failure as one line for a payload-invalid detail. */
export const explainIssues = (error: { issues: Array<{ path: PropertyKey[], message: string }> }) =>
  error.issues.map(issue => `${issue.path.join('.') || '(body)'}: ${issue.message}`).join('; ')
