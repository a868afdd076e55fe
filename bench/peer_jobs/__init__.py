"""bench/peers.py's and bench/scaling.py's pieces: the jobs of each system and how each one runs.

- ``record.py``: what every job of every system does (standard library only): it writes its
  enqueue, start and end times to a per-process file the bench reads; workload B's jobs first wait
  for the bench's HTTP server (``httpd.py``), which answers every request after 100 ms.
- ``ours.py``: this project's jobs (declared with ``@queues.job``; stock rq runs the very same
  functions); ``celery_app.py``, ``dramatiq_jobs.py``, ``arq_jobs.py``, ``taskiq_jobs.py``: the peers' (run
  in the bench's own virtual environment, requirements-bench.txt).
- ``produce.py``: the producer process of each system (fills a queue, or sends jobs at a pace).
- ``systems.py``: how each system's worker is started; ``measure.py``: one run of one system and
  its figures (jobs/s, pick-up latency, CPU per 1,000 jobs, peak RSS of the worker's process tree).
- ``workloads.py``: which systems run each workload (A, B, B-async, C), how many jobs, how many at once;
  ``delay_proxy.py``: workload C's Redis 2 ms away; ``report.py``: peers.py's table and target lines.
"""
