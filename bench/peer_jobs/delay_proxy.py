"""Workload C's distance: a TCP proxy in front of the private redis-server that holds every chunk ``--delay``
seconds (2 ms) in each direction, so a round trip through it costs 4 ms more than one to Redis itself.

    python bench/peer_jobs/delay_proxy.py --target 127.0.0.1:6379 --delay 0.002    # prints "listening on <port>"

Delayed, not throttled: each direction of each connection keeps a queue of (due time, chunk); a chunk is
written when its own due time comes, after every chunk that came before it (order kept), and chunks that
arrive while others wait are not held any longer for it. asyncio's timers wake on epoll's whole
milliseconds (a timer for 2 ms fires 2 to 3 ms later), so a chunk's timer is set ``EARLY`` (0.5 ms) before
its due time and the chunks due within ``EARLY`` go out with it: each chunk is held ``delay`` +- 0.5 ms,
``delay`` on average on a quiet machine, more on a loaded one (bench/peers.py prints the PING round trip
through the proxy next to the direct one). Connections share nothing but the event loop, so one busy
connection does not slow another (within what one process forwards: tens of thousands of chunks a second,
above what workload C sends). Standard library only, in a process of its own (its CPU is not the worker's).

Why a proxy and not ``tc qdisc ... netem delay 2ms`` in a network namespace: the bench runs as root here and
``tc`` is installed (/usr/sbin/tc), but the kernel under this container has no netem qdisc ("Specified qdisc
kind is unknown" inside a fresh ``ip netns``), and netem on the shared ``lo`` would delay every other process's
Redis too. A proxy runs wherever the bench does; it adds a user-space hop of its own (tens of µs) on top of
the 2 ms, the same for every system.
"""

import argparse
import asyncio
import collections

EARLY = 0.0005  # seconds: half of epoll's millisecond, by which a timer fires late


class Side(asyncio.Protocol):
    """One end of a proxied connection: what it receives goes out of ``peer``'s transport ``delay`` seconds later."""

    def __init__(self, delay):
        self.delay = delay
        self.loop = asyncio.get_running_loop()
        self.transport = None
        self.peer = None
        self.pending = collections.deque()  # (due, chunk), in arrival order
        self.timer = None
        self.ended = False  # this end closed or sent EOF: close the peer once the pending chunks are out

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        due = self.loop.time() + self.delay
        self.pending.append((due, data))
        if self.timer is None:
            self.timer = self.loop.call_at(due - EARLY, self.flush)

    def eof_received(self):
        self.end()
        return False

    def connection_lost(self, exc):
        self.end()

    def end(self):
        if not self.ended:
            self.ended = True
            if self.timer is None:
                self.flush()

    def flush(self):
        """Writes the chunks that are due (in order), and sets the timer for the next one."""
        self.timer = None
        peer = self.peer.transport if self.peer else None
        if peer is None:  # the upstream connection is not made yet: connected() flushes
            return
        now, out = self.loop.time(), []
        while self.pending and self.pending[0][0] <= now + EARLY:
            out.append(self.pending.popleft()[1])
        if out and not peer.is_closing():
            peer.write(b"".join(out))
        if self.pending:
            self.timer = self.loop.call_at(self.pending[0][0] - EARLY, self.flush)
        elif self.ended and not peer.is_closing():
            peer.close()


class Client(Side):
    """The side a client connects to; it opens its own connection to the target."""

    def __init__(self, delay, host, port):
        super().__init__(delay)
        self.target = host, port

    def connection_made(self, transport):
        super().connection_made(transport)
        self.loop.create_task(self.connect())

    async def connect(self):
        upstream = Side(self.delay)
        try:
            await self.loop.create_connection(lambda: upstream, *self.target)
        except OSError:
            self.transport.close()
            return
        upstream.peer, self.peer = self, upstream
        if self.ended and not self.pending:
            upstream.transport.close()
        elif self.timer is None and self.pending:
            self.timer = self.loop.call_at(self.pending[0][0] - EARLY, self.flush)


async def serve(port, host, target_port, delay):
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Client(delay, host, target_port), "127.0.0.1", port, backlog=1024)
    print(f"listening on {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True, help="host:port of the redis-server")
    parser.add_argument("--port", type=int, default=0, help="where to listen (0: a free port)")
    parser.add_argument("--delay", type=float, default=0.002, help="seconds each chunk is held, each way")
    opts = parser.parse_args()
    host, _, target_port = opts.target.rpartition(":")
    try:
        asyncio.run(serve(opts.port, host or "127.0.0.1", int(target_port), opts.delay))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
