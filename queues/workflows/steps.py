"""The app's own job of a chain (a job module of the app: ``catalog.add_app_module`` in ``queues/apps.py``).

``advance`` is the ``on_success`` of every step's batch: it opens the next step (``chains.advance``).
"""

from queues.catalog.jobs import job
from queues.workflows import chains


@job
def advance(chain_id, index, batch_id):
    """Step ``index`` of chain ``chain_id`` succeeded (its batch ``batch_id``): the next step, or the end."""
    return chains.advance(chain_id, index, batch_id)
