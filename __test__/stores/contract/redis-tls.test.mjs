// RedisLockStore over TLS (rediss://) keeps to the whole store contract
// (../contract.mjs), across processes too, on a redis-server of the file's
// own whose only port speaks TLS, with a throwaway CA (support/certs.mjs).
import { redisContract } from '../../helpers/redis-contract.mjs'
import { startRedis } from '../../../support/servers.mjs'
import { makeCertificates } from '../../../support/certs.mjs'

redisContract('RedisLockStore over TLS', async () => {
  const certificates = makeCertificates()
  const { ca, file } = certificates
  const redis = await startRedis({
    args: (port) => [
      '--port', '0', '--tls-port', String(port), '--bind', '127.0.0.1',
      '--tls-cert-file', file('server.crt'), '--tls-key-file', file('server.key'),
      '--tls-ca-cert-file', file('ca.crt'), '--tls-auth-clients', 'no',
    ],
  })
  return {
    url: `rediss://127.0.0.1:${redis.port}`,
    inspectOptions: { tls: { ca } },
    tlsCaFile: file('ca.crt'),
    async close() {
      await redis.close()
      certificates.remove()
    },
  }
}, ['openssl'])
