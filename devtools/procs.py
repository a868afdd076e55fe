"""Process trees from /proc, for the benchmarks in bench/ (Linux)."""

import os


def descendants(root):
    """``root`` and every process below it."""
    children = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat") as fp:
                    ppid = int(fp.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    pids, i = [root], 0
    while i < len(pids):
        pids += children.get(pids[i], [])
        i += 1
    return pids
