"""Who asked, and what they may touch: the owner of an API request, its jobs and its data.

- The owner of a request is its authenticated user. In dev (``OPTIMA_ENV=dev``, where the API is
  open) every anonymous caller is one owner, "anonymous", so the run command's demo works without
  a login; in the database that owner is the inactive user ``dev-anonymous``, created on first use.
- A job enqueued through the API carries ``meta["owner"]``: the user's id, or "anonymous".
  ``GET /jobs/<id>/`` answers the owner and staff users holding the queue panel's view permission;
  anyone else gets the same 404 as for a job that never existed. ``GET /jobs/`` lists the caller's own
  jobs (the owner index, queues/search/), every job for those staff users.
- A cabinet or product is served to its owner only (404 to anyone else, whether or not it exists).
  In dev the anonymous owner may use any, and one nobody has yet is created for it on first use.
- Unique keys are scoped by owner (``scoped``): two owners never share a waiting job.
"""

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from rest_framework.exceptions import NotFound

import queues
from features.permissions import dev_mode

from .models import Cabinet, Product

ANONYMOUS = "anonymous"
DEV_ANONYMOUS_USERNAME = "dev-anonymous"
# Staff holding either may read every job's status (they see every job in the panel anyway).
JOB_VIEW_PERMS = (queues.VIEW_QUEUE_PANEL, queues.ACT_ON_QUEUE_PANEL)


@dataclass(frozen=True)
class Owner:
    """The owner of one request: ``key`` goes into job meta and unique keys, ``user`` owns rows."""

    key: object  # int user id, or ANONYMOUS
    request_user: object

    @property
    def anonymous(self):
        return self.key == ANONYMOUS

    @property
    def user(self):
        """The user owning rows created for this request (``dev-anonymous`` for the dev anonymous owner)."""
        return dev_anonymous_user() if self.anonymous else self.request_user


def owner_of(request):
    """The request's owner, or None (an anonymous caller outside dev: the permission refuses it first)."""
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return Owner(user.pk, user)
    if dev_mode():
        return Owner(ANONYMOUS, None)
    return None


def dev_anonymous_user():
    """The inactive user that owns what the dev anonymous owner creates (never able to log in)."""
    User = get_user_model()
    user, created = User.objects.get_or_create(
        **{User.USERNAME_FIELD: DEV_ANONYMOUS_USERNAME}, defaults={"is_active": False}
    )
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user


def scoped(owner, key):
    """A unique key of this owner's own: ``owner-7.cabinet-12`` (another owner's never matches)."""
    return f"owner-{owner.key}.{key}"


def job_meta(owner):
    """The ``meta=`` of an enqueue that records ``owner`` (``queues.job_owner`` reads it back)."""
    return queues.owner_meta(owner.key)


def owns_job(owner, meta):
    """True when ``owner`` enqueued the job of ``meta`` (a ``JobState``'s)."""
    return owner is not None and queues.job_owner(meta) == owner.key


def can_read_all_jobs(request):
    """Active staff with the panel's view (or act) permission: they read every job (``GET /jobs/`` lists them)."""
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_active and user.is_staff and any(user.has_perm(p) for p in JOB_VIEW_PERMS))


def can_read_job(request, meta):
    """The job's owner, or active staff with the panel's view (or act) permission."""
    if can_read_all_jobs(request):
        return True
    return owns_job(owner_of(request), meta)


def owned_cabinet(owner, cabinet_id):
    """The caller's cabinet ``cabinet_id``, or ``NotFound`` (404) whether it is another's or none."""
    return _owned(owner, Cabinet, "cabinet_id", cabinet_id, "cabinet")


def owned_product(owner, product_id):
    """The caller's product ``product_id``, or ``NotFound`` (404) whether it is another's or none."""
    return _owned(owner, Product, "product_id", product_id, "product")


def _owned(owner, model, field, value, noun):
    if owner is not None and owner.anonymous:
        # Dev only (owner_of gives no anonymous owner elsewhere): the demo may use any id.
        row, _created = model.objects.get_or_create(**{field: value}, defaults={"owner": owner.user})
        return row
    row = model.objects.filter(**{field: value}).first() if owner is not None else None
    if row is None or row.owner_id != owner.key:
        # One answer for "another's" and "none": the status code tells nothing about other sellers.
        raise NotFound(f"No {noun} {value} among yours ({field}={value}).")
    return row
