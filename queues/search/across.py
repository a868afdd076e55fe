"""A search over every Redis server of the queues (issue 36, QUEUES_REDIS_SERVERS): one source, many servers.

Each server holds the search index and rq's lists of its own queues (the producer writes a job's entries with
the job, on its queue's server). A search that names no queue reads the servers one after the other, the
default first, as one source laid end to end: ``start`` is an offset in that concatenation (server 1's
candidates, then server 2's, ...), so paging stays exact — no hit is shown twice or skipped — and each server's
hits keep their own order (newest first within a server). A page that fills up, or whose scan budget runs out,
inside a server stops there; ``next_start`` continues from that point.

A server that does not answer is passed over and named (``Found.servers_down``): the others' jobs are still
found. Only when none answers does the search fail (``QueueUnavailable``, naming the first that failed).
"""

import dataclasses

import redis


def search_servers(clients, run, start, page_size, scan_limit, unavailable):
    """The merged ``Found`` of ``run(connection, local start, page size, scan limit)`` over ``clients``
    ({server name: client}, in order). ``unavailable(exc, connection)``: the QueueUnavailable of a failure.
    ``total`` counts the candidates of the servers read for this page (a page that ends inside a server has
    not read the next ones)."""
    merged, base, failed, down = None, 0, None, []
    order = list(clients.items())
    for number, (server, client) in enumerate(order):
        want = page_size - (len(merged.hits) if merged else 0)
        budget = scan_limit - (merged.scanned if merged else 0)
        try:
            found = run(client, max(0, start - base), want, max(budget, 1))
        except redis.RedisError as exc:
            failed = failed or unavailable(exc, client)
            down.append(server)
            continue
        merged = _add(merged, found, start)
        if found.next_start is not None:  # the page filled up, or its scan budget ran out, inside this server
            merged.next_start = base + found.next_start
            break
        base += found.total - found.gone - found.misplaced  # this server's candidates, as the next page sees them
        last = number == len(order) - 1
        if not last and (len(merged.hits) >= page_size or merged.scanned >= scan_limit):
            merged.next_start = base  # the next server, from its first candidate
            break
    if merged is None:
        raise failed
    merged.servers_down = down
    return merged


def _add(merged, found, start):
    if merged is None:
        return dataclasses.replace(found, start=start, next_start=None, hits=list(found.hits))
    merged.hits.extend(found.hits)
    merged.scanned += found.scanned
    merged.total += found.total
    merged.exact = merged.exact and found.exact
    merged.gone += found.gone
    merged.misplaced += found.misplaced
    return merged
