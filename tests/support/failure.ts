/** Resolves to what `promise` rejected with; fails the test when it resolved. */
export async function failureOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise
  }
  catch (error) {
    return error
  }
  throw new Error('expected the call to fail, it succeeded')
}
