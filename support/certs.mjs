// Throwaway TLS certificates for the TLS tests, made with the openssl CLI: a
// CA, a server certificate valid for localhost and 127.0.0.1 only (so a
// server that also listens on 127.0.0.2 can be reached under a name its
// certificate does not hold), and a client certificate.

import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { TOOLS, missing } from './tools.mjs'

/**
 * Makes the certificates in a new folder. Returns `{ ca, server, client,
 * file(name), remove() }`: PEM text (`server` and `client` as `{ cert, key }`)
 * and the folder's file paths (`ca.crt`, `server.crt`, `server.key`, ...).
 */
export function makeCertificates() {
  const dir = mkdtempSync(join(tmpdir(), 'keel-tls-'))
  const file = (name) => join(dir, name)
  const openssl = (...args) => {
    const bin = TOOLS.openssl.find()
    if (!bin) throw new Error(`${missing('openssl')} (the openssl CLI makes the test certificates)`)
    const r = spawnSync(bin, args, { cwd: dir, encoding: 'utf8' })
    if (r.error) throw new Error(`openssl ${args.join(' ')} could not run: ${r.error.message}`)
    if (r.status !== 0) throw new Error(`openssl ${args.join(' ')} failed:\n${r.stderr}`)
  }
  const issue = (name, extensions) => {
    writeFileSync(file(`${name}.ext`), extensions)
    openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-subj', `/CN=${name}`,
      '-keyout', `${name}.key`, '-out', `${name}.csr`)
    openssl('x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '1',
      '-extfile', `${name}.ext`, '-out', `${name}.crt`)
    return { cert: readFileSync(file(`${name}.crt`), 'utf8'), key: readFileSync(file(`${name}.key`), 'utf8') }
  }
  openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
    '-subj', '/CN=keel test CA', '-addext', 'basicConstraints=critical,CA:TRUE',
    '-addext', 'keyUsage=critical,keyCertSign,cRLSign', '-keyout', 'ca.key', '-out', 'ca.crt')
  const ca = readFileSync(file('ca.crt'), 'utf8')
  const server = issue('server', 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n')
  const client = issue('client', 'extendedKeyUsage=clientAuth\n')
  return { ca, server, client, file, remove: () => rmSync(dir, { recursive: true, force: true }) }
}
