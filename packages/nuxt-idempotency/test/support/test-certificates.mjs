// A certificate authority and a server certificate for 127.0.0.1 and localhost, made with openssl in
// a folder of the caller's at test time (never committed): for TLS servers the tests own.
import { spawn } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

function openssl(args, cwd) {
  return new Promise((resolve, reject) => {
    const child = spawn('openssl', args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    for (const stream of [child.stdout, child.stderr]) stream.setEncoding('utf8').on('data', (chunk) => { output += chunk })
    child.once('error', reject)
    child.once('close', code => code === 0 ? resolve() : reject(new Error(`openssl ${args[0]} failed (exit code ${code}):\n${output}`)))
  })
}

/**
 * Writes ca.crt, server.crt and server.key into `folder` (EC P-256, valid two days); `label`
 * names the CA, so two CAs made for one test differ.
 * @param {string} folder
 * @param {string} [label]
 */
export async function makeTestCertificates(folder, label = 'Idempotent Checkout test CA') {
  const file = name => join(folder, name)
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']
  await openssl(['req', '-x509', ...ec, '-keyout', file('ca.key'), '-out', file('ca.crt'), '-days', '2', '-subj', `/CN=${label}`], folder)
  await openssl(['req', ...ec, '-keyout', file('server.key'), '-out', file('server.csr'), '-subj', '/CN=localhost'], folder)
  writeFileSync(file('server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n')
  await openssl(['x509', '-req', '-in', file('server.csr'), '-CA', file('ca.crt'), '-CAkey', file('ca.key'), '-CAcreateserial',
    '-out', file('server.crt'), '-days', '2', '-extfile', file('server.ext')], folder)
  return {
    caFile: file('ca.crt'),
    certFile: file('server.crt'),
    keyFile: file('server.key'),
    ca: readFileSync(file('ca.crt'), 'utf8'),
    cert: readFileSync(file('server.crt'), 'utf8'),
    key: readFileSync(file('server.key'), 'utf8'),
  }
}
