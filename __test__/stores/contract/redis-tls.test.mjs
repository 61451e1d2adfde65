// RedisLockStore over TLS (rediss://) keeps to the whole store contract
// (../contract.mjs), across processes too, on a redis-server of the file's
// own whose only port speaks TLS, with a throwaway CA (support/certs.mjs).
import { Redis } from 'ioredis'
import { storeContract } from '../contract.mjs'
import { startRedis } from '../../../support/servers.mjs'
import { makeCertificates } from '../../../support/certs.mjs'
import { openStore } from '../../helpers/stores.mjs'

storeContract('RedisLockStore over TLS', {
  async open() {
    const certificates = makeCertificates()
    const { ca, file } = certificates
    const redis = await startRedis({
      args: (port) => [
        '--port', '0', '--tls-port', String(port), '--bind', '127.0.0.1',
        '--tls-cert-file', file('server.crt'), '--tls-key-file', file('server.key'),
        '--tls-ca-cert-file', file('ca.crt'), '--tls-auth-clients', 'no',
      ],
    })
    const url = `rediss://127.0.0.1:${redis.port}`
    const opened = await openStore({ KEEL_TEST_STORE: 'redis', REDIS_URL: url, KEEL_TEST_TLS_CA: file('ca.crt') })
    const inspect = new Redis(url, { tls: { ca } })
    return {
      ...opened,
      deleteKey: (key) => inspect.del(key),
      async close() {
        await opened.close()
        inspect.disconnect()
        await redis.close()
        certificates.remove()
      },
    }
  },
  fencing: true,
  processes: true,
  announcesReleases: true,
  anyKey: true,
  semaphores: 'native',
  readWrite: true,
})
