import { testSecrets } from './app'
import { request, type RequestOptions, type TestResponse } from './http'

/** The operator's bearer header for the OPS_TOKEN the test apps start with. */
export const opsHeaders = { authorization: `Bearer ${testSecrets.opsToken}` }

/**
 * A request to an operator route (/api/ops/**, /api/metrics) with the test OPS_TOKEN, or with
 * `token` for an app started with another; the caller's headers are added to it.
 */
export function opsRequest(baseUrl: string, path: string, options: RequestOptions & { token?: string } = {}): Promise<TestResponse> {
  const { token = testSecrets.opsToken, headers, ...rest } = options
  return request(baseUrl, path, { ...rest, headers: { authorization: `Bearer ${token}`, ...headers } })
}
