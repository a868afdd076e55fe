"""``manage.py rqstats``: django-rq's command, reading JSON only and writing nothing.

django-rq's counts its registries with rq's ``cleanup()``, which loads expired jobs with pickle (its
registries are built without a serializer) and moves them. This one runs it with the panel's
read-only names (``queues.board.readonly``, installed by ``queues.board.patches``): the same output,
JSON jobs only, no write.
"""

from django_rq.management.commands import rqstats

from queues.board import patches


class Command(rqstats.Command):
    def handle(self, *args, **options):
        patches.install()
        return super().handle(*args, **options)
