"""Workload B's server: answers every GET after ``--delay`` seconds (0.1), keep-alive, one asyncio loop.

    python bench/peer_jobs/httpd.py --port 0 --delay 0.1    # prints "listening on <port>"

Standard library only. Waiting costs it a timer, not a thread: at 320 requests/s in flight 32 at
a time it uses a few percent of a core, so it is not what limits workload B (the fake marketplace,
``features.marketplace.fake``, spends a thread and a request log entry per request).
"""

import argparse
import asyncio

BODY = b'{"ok": true}'
ANSWER = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(BODY)) + BODY


async def serve(port, delay):
    async def handle(reader, writer):
        try:
            while True:
                line = await reader.readline()
                if not line:
                    break
                while await reader.readline() not in (b"\r\n", b""):
                    pass
                await asyncio.sleep(delay)
                writer.write(ANSWER)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024)
    print(f"listening on {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--delay", type=float, default=0.1)
    opts = parser.parse_args()
    try:
        asyncio.run(serve(opts.port, opts.delay))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
