"""A real ``manage.py`` child process of the working tree, its output in a file (conftest's ``start_worker``)."""

import signal
import subprocess
import sys
from pathlib import Path

from tests.support import ROOT


class WorkerProcess:
    """A real ``manage.py rqworker`` child process."""

    def __init__(self, args, env, log_path):
        self.args = args
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT
        )

    @property
    def pid(self):
        return self.process.pid

    def signal(self, sig):
        self.process.send_signal(sig)

    def wait(self, timeout=30):
        return self.process.wait(timeout)

    def stop(self, timeout=30):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        return self.process.returncode

    def output(self):
        self._log.flush()
        return Path(self.log_path).read_text(errors="replace")
