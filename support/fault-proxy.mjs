// A TCP proxy in front of a server the tests started, for the faults a real
// server or network makes only now and then, made on demand, and to see what
// crosses the wire.

import { createServer, connect } from 'node:net'

/**
 * A proxy on a free loopback port in front of `127.0.0.1:port`:
 * - `loseNextReply()`: the next command goes through to the server but the
 *   client's connection is cut instead of the reply passed on (the command
 *   ran; its answer is lost);
 * - `cutAfterReplyBytes(n)`: the client's connection is cut once `n` more
 *   bytes of replies have been passed on (a server that closes mid-pipeline);
 * - `dribble = true`: replies are passed on one byte at a time, each in its
 *   own write a turn apart (a reply split across many reads);
 * - `latencyMs = n`: every chunk, each way, is passed on `n` ms late (order kept);
 * - `silenceExisting()`: the connections open now pass nothing on any more,
 *   either way, and stay open (a host gone, a flow a NAT or load balancer
 *   dropped); connections made later work;
 * - `stopReading()` / `resumeReading()`: the proxy stops reading what clients
 *   send (a slow reader: their writes back up in the kernel's buffers), then
 *   reads again;
 * - `holdReplies()` / `passReplies()`: replies are kept back (`heldReplies`
 *   counts the chunks), then passed on, in order;
 * - `cutClients()`: every client connection closes now;
 * - `connections`: client connections accepted; `writes`: chunks of bytes
 *   received from clients, and `written`: their bytes.
 */
export async function startProxy(port) {
  const sockets = new Set()
  const pairs = new Set()
  let loseReply = false
  let cutAfter = Infinity
  let reading = true
  let holding = false
  /** @type {(() => void)[]} replies kept back, to pass on in order */
  const held = []
  const proxy = {
    port: 0,
    url: '',
    connections: 0,
    writes: 0,
    written: 0,
    dribble: false,
    latencyMs: 0,
    heldReplies: 0,
    holdReplies() {
      holding = true
    },
    passReplies() {
      holding = false
      for (const pass of held.splice(0)) pass()
    },
    loseNextReply() {
      loseReply = true
    },
    cutAfterReplyBytes(n) {
      cutAfter = n
    },
    silenceExisting() {
      for (const pair of pairs) pair.silent = true
    },
    stopReading() {
      reading = false
      for (const pair of pairs) pair.client.pause()
    },
    resumeReading() {
      reading = true
      for (const pair of pairs) pair.client.resume()
    },
    cutClients() {
      for (const s of sockets) s.destroy()
    },
    close: () => new Promise((resolve) => (proxy.cutClients(), listener.close(resolve))),
  }
  /** Pass `d` on with `write` after the proxy's latency, keeping the order of `queue`. */
  const later = (queue, write) => {
    if (proxy.latencyMs === 0 && queue.pending === 0) return write()
    queue.pending++
    const due = Date.now() + proxy.latencyMs
    queue.last = queue.last.then(async () => {
      const wait = due - Date.now()
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait))
      queue.pending--
      write()
    })
  }
  const listener = createServer((client) => {
    proxy.connections++
    client.setNoDelay(true)
    const upstream = connect(port, '127.0.0.1')
    upstream.setNoDelay(true)
    const pair = { client, silent: false }
    pairs.add(pair)
    sockets.add(client)
    sockets.add(upstream)
    if (!reading) client.pause()
    const drop = () => {
      client.destroy()
      upstream.destroy()
      sockets.delete(client)
      sockets.delete(upstream)
      pairs.delete(pair)
    }
    const requests = { last: Promise.resolve(), pending: 0 }
    const replies = { last: Promise.resolve(), pending: 0 }
    client.on('data', (d) => {
      if (pair.silent) return
      proxy.writes++
      proxy.written += d.length
      later(requests, () => upstream.write(d))
    })
    // Replies leave in order, one chunk after another, whatever the mode.
    let sending = Promise.resolve()
    upstream.on('data', (d) => {
      if (pair.silent) return
      if (holding) {
        proxy.heldReplies++
        held.push(() => !client.destroyed && later(replies, () => client.write(d)))
        return
      }
      if (loseReply) {
        loseReply = false
        return drop()
      }
      if (d.length >= cutAfter) {
        const part = d.subarray(0, cutAfter)
        cutAfter = Infinity
        client.write(part, drop)
        return
      }
      cutAfter -= d.length
      if (!proxy.dribble) return later(replies, () => client.write(d))
      sending = sending.then(async () => {
        for (const byte of d) {
          if (client.destroyed) return
          client.write(Buffer.of(byte))
          await new Promise((resolve) => setImmediate(resolve))
        }
      })
    })
    upstream.on('error', drop)
    upstream.on('close', drop)
    client.on('error', drop)
    // What the client sent before it went still reaches the server, after
    // the proxy's latency, as over a real network (a process that exits
    // right after writing a release).
    client.on('close', () => void requests.last.then(drop))
  })
  await new Promise((resolve, reject) => listener.once('error', reject).listen(0, '127.0.0.1', resolve))
  proxy.port = listener.address().port
  proxy.url = `redis://127.0.0.1:${proxy.port}`
  return proxy
}
