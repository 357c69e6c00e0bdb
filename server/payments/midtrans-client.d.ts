/** The part of the official `midtrans-client` package (CommonJS, untyped) that the Midtrans adapter uses. */
declare module 'midtrans-client' {
  type Answer = Record<string, unknown>
  export class CoreApi {
    constructor(options: { isProduction: boolean, serverKey: string, clientKey?: string })
    apiConfig: { getCoreApiBaseUrl(): string }
    httpClient: { http_client: { defaults: { timeout?: number } } }
    charge(parameter: Record<string, unknown>): Promise<Answer>
    transaction: {
      status(orderId: string): Promise<Answer>
      cancel(orderId: string): Promise<Answer>
      refund(orderId: string, parameter: Record<string, unknown>): Promise<Answer>
      refundDirect(orderId: string, parameter: Record<string, unknown>): Promise<Answer>
    }
  }
  export class MidtransError extends Error {
    constructor(message: string, httpStatusCode?: number | string | null, ApiResponse?: Answer | null, rawHttpClientData?: MidtransError['rawHttpClientData'])
    /** A number for HTTP errors, the body's status_code string for errors in a 200 answer, null without an answer. */
    httpStatusCode: number | string | null
    ApiResponse: Answer | null
    /** The axios response, or the axios error (whose `response` holds it). */
    rawHttpClientData: { headers?: Record<string, string>, response?: { headers?: Record<string, string> } } | null
  }
  const midtrans: { CoreApi: typeof CoreApi, MidtransError: typeof MidtransError }
  export default midtrans
}
