import queues


def test_enqueued_job_runs_on_a_real_worker(start_worker, queue_redis):
    job = queues.enqueue("default", "tests.jobs.sample.add", 2, 3)
    worker = start_worker("default", "--burst")
    assert worker.wait(60) == 0, worker.output()
    job.refresh()
    assert job.get_status() == "finished"
    assert job.return_value() == 5
