"""One run of one system on one workload, and its figures.

A run: Redis flushed; the producer fills the queue with ``count`` jobs; the worker (a real process
tree, started from its command line) drains it while this process samples, every 0.2 s, the jobs
done (the record files' sizes), the CPU time and the RSS of the worker's process tree; then the
producer sends ``latency_count`` jobs one every ``every`` seconds to the now idle worker; then the
worker gets SIGTERM.

- jobs/s: steady state while draining, from the jobs' own end times: the first 10 % left out
  (start-up), then (jobs - 1) / (last end - first end);
- pick-up latency p50/p95: started - enqueued of the paced jobs (low load, the worker warm: one job
  every ``every`` seconds, or every 2 / (its jobs/s) when that is longer, so it is never more than
  half busy);
- CPU s / 1,000 jobs: user + system time of the worker's tree (work horses that ended included, via
  their parent's ``cutime``) between the sample where 10 % were done and the last, per job done;
- Redis commands per job: the server's INFO commandstats (commands that Lua scripts call included)
  from the worker's start to the last job drained, over the jobs;
- peak RSS: the largest sum of the tree's resident sets over the samples (shared pages counted in
  every process, as ``ps`` does).
"""

import json
import os
import signal
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from devtools.procs import descendants

from .record import RECORD
from .systems import APP_BIN, PEERS_BIN, ROOT

WARM_UP = 0.10
TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass
class Result:
    system: str
    workload: str
    jobs: int
    concurrency: int = 1
    error: str = ""
    rate: float = None
    p50_ms: float = None
    p95_ms: float = None
    cpu_per_1000: float = None
    peak_rss_mib: float = None
    fill_seconds: float = None
    commands_per_job: float = None  # Redis commands while draining (start-up included) / jobs


def commands(redis):
    """Commands the server has run so far (INFO commandstats: those Lua scripts call included)."""
    return sum(v["calls"] for v in redis.info("commandstats").values())


def done_count(record_dir):
    return sum(e.stat().st_size for e in os.scandir(record_dir)) // RECORD.size


def records(record_dir):
    out = []
    for entry in os.scandir(record_dir):
        data = Path(entry.path).read_bytes()
        out += [RECORD.unpack_from(data, i) for i in range(0, len(data) - len(data) % RECORD.size, RECORD.size)]
    return out


def tree_usage(root):
    """(CPU seconds, RSS bytes) of ``root``'s process tree; children that ended count in their parent's cutime."""
    cpu = rss = 0
    for pid in descendants(root):
        try:
            with open(f"/proc/{pid}/stat") as fp:
                fields = fp.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/statm") as fp:
                rss += int(fp.read().split()[1]) * PAGE
        except (OSError, IndexError):
            continue
        cpu += sum(int(f) for f in fields[11:15]) / TICK  # utime stime cutime cstime
    return cpu, rss


class Producer:
    """The system's producer process (bench/peer_jobs/produce.py), started once per run."""

    def __init__(self, system, workload, env, log):
        python = str((PEERS_BIN if system.peers_venv else APP_BIN) / "python")
        self.family, self.log = system.family, log
        self.process = subprocess.Popen(
            [python, "-m", "bench.peer_jobs.produce", system.producer, workload],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )

    def send(self, count, every=0.0):
        """``count`` jobs, one every ``every`` seconds (0: at once); -> seconds it took."""
        try:
            self.process.stdin.write(f"{count} {every}\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            pass
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.family} producer exited with {self.process.wait()}; see {self.log.name}")
        return json.loads(line)["seconds"]

    def close(self):
        self.process.stdin.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def stop(process):
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(40)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)  # what is left of its tree (a peer's children)
    except ProcessLookupError:
        pass
    process.wait()


def wait_done(process, record_dir, target, stall, samples):
    """Samples until ``target`` jobs are done; -> "" or why not."""
    last, last_change = -1, time.monotonic()
    while True:
        time.sleep(0.2)
        done = done_count(record_dir)
        if samples is not None:
            samples.append((time.monotonic(), done, *tree_usage(process.pid)))
        if done >= target:
            return ""
        if process.poll() is not None:
            return f"the worker exited with {process.returncode} after {done} of {target} jobs"
        if done != last:
            last, last_change = done, time.monotonic()
        elif time.monotonic() - last_change > stall:
            return f"no job done for {stall:g} s ({done} of {target})"


def run(
    system, workload, count, *, concurrency, env_maker, tmp, redis, latency_count, every, stall=60.0, worker_redis=None
):
    """One run; -> Result (``error`` set when it did not complete). ``worker_redis``: the worker's Redis URL when
    not the producer's (workload C: the delay proxy's; the producer fills the queue on the direct one)."""
    name = f"{system.key}-{workload}-{time.monotonic_ns()}"
    record_dir = tmp / name
    record_dir.mkdir()
    result = Result(system.key, workload, count, concurrency)
    env = env_maker.for_system(system, record_dir, concurrency)
    worker_env = env_maker.for_system(system, record_dir, concurrency, redis_url=worker_redis)
    redis.flushall()
    with open(tmp / f"{name}.log", "w") as log:
        producer = Producer(system, workload, env, log)
        try:
            result.fill_seconds = producer.send(count)
        except RuntimeError as exc:
            producer.close()
            result.error = str(exc)
            return result
        before = commands(redis)
        process = subprocess.Popen(
            system.command(concurrency, worker_redis or env_maker.redis_url),
            cwd=ROOT,
            env=worker_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        samples = []
        try:
            result.error = wait_done(process, record_dir, count, stall, samples)
            result.commands_per_job = (commands(redis) - before - 1) / count  # less our own INFO
            if not result.error and latency_count:
                # Low load: never more than half what it just drained (a forking worker does ~20-100 jobs/s here).
                rate = drain_rate(sorted(records(record_dir)), count)
                producer.send(latency_count, max(every, 2 / rate) if rate else every)
                result.error = wait_done(process, record_dir, count + latency_count, stall, None)
        except RuntimeError as exc:
            result.error = str(exc)
        finally:
            producer.close()
            stop(process)
    if result.error:
        result.error += f" (log: {log.name})"
        return result
    figures(result, sorted(records(record_dir)), count, samples)
    return result


def drain_rate(recs, count):
    """Jobs/s of the first ``count`` records (by enqueue time), the first 10 % left out; None if too few."""
    ends = sorted(r[2] for r in recs[:count])
    used = ends[int(len(ends) * WARM_UP) :]
    return (len(used) - 1) / (used[-1] - used[0]) if len(used) >= 2 and used[-1] > used[0] else None


def figures(result, recs, count, samples):
    """Fills ``result`` from the records (sorted by enqueue time: the fill's first) and the samples."""
    paced = recs[count:]
    result.rate = drain_rate(recs, count)
    if paced:
        waits = sorted((r[1] - r[0]) * 1000 for r in paced)
        result.p50_ms = statistics.median(waits)
        result.p95_ms = waits[min(len(waits) - 1, round(0.95 * (len(waits) - 1)))]
    first = next((s for s in samples if s[1] >= count * WARM_UP), samples[0])
    last = samples[-1]
    if last[1] > first[1]:
        result.cpu_per_1000 = (last[2] - first[2]) / (last[1] - first[1]) * 1000
    elif last[1]:
        result.cpu_per_1000 = last[2] / last[1] * 1000
    result.peak_rss_mib = max(s[3] for s in samples) / 2**20
