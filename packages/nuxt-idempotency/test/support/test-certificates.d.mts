export interface TestCertificates {
  caFile: string
  certFile: string
  keyFile: string
  /** The same files' PEM text. */
  ca: string
  cert: string
  key: string
}

/** Writes ca.crt, server.crt and server.key (for 127.0.0.1 and localhost) into `folder`. */
export function makeTestCertificates(folder: string, label?: string): Promise<TestCertificates>
