"""Owners (issue 11, item 2): a job records who asked; its status, unique and idempotency keys, and
cabinets and products are the owner's own. Users A and B, staff, and dev's anonymous owner."""

import pytest
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.test import override_settings
from rest_framework.test import APIClient

import queues
from features.content.models import ContentGeneration
from features.repricer.models import PriceChange
from features.sellers.models import Cabinet, Product
from features.sellers.owners import DEV_ANONYMOUS_USERNAME

pytestmark = pytest.mark.django_db(transaction=True)

VIEW = "queues.view_queue_panel"


def post(client, path, body):
    return client.post(path, body, format="json")


def sync(client, cabinet_id):
    response = post(client, "/features/orders/sync/", {"cabinet_id": cabinet_id})
    assert response.status_code == 202, response.content
    return response.json()["job_id"]


def reprice(client, product_id, price, key):
    return post(client, "/features/repricer/", {"product_id": product_id, "price": price, "idempotency_key": key})


@pytest.fixture
def seller_a(api):
    return api.own(cabinets=[5], products=[111])


@pytest.fixture
def seller_b(make_api):
    return make_api("seller-b").own(cabinets=[6], products=[222])


def test_a_job_enqueued_through_the_api_records_its_owner(seller_a):
    job = queues.fetch_job(sync(seller_a, 5))
    assert job.meta["owner"] == seller_a.user.pk


def test_a_job_answers_its_owner_and_404s_another_user_exactly_like_an_unknown_id(seller_a, seller_b):
    job_id = sync(seller_a, 5)
    mine = seller_a.get(f"/jobs/{job_id}/")
    theirs = seller_b.get(f"/jobs/{job_id}/")
    unknown = seller_b.get("/jobs/0123456789abcdef0123456789abcdef/")
    assert mine.status_code == 200
    assert mine.json()["job_id"] == job_id
    assert theirs.status_code == 404
    assert theirs.json() == {"detail": f"No job {job_id!r} (never enqueued, or expired)."}
    assert unknown.json()["detail"] == "No job '0123456789abcdef0123456789abcdef' (never enqueued, or expired)."


def test_staff_with_the_panel_view_permission_read_any_job_and_other_staff_do_not(seller_a, make_api):
    job_id = sync(seller_a, 5)
    viewer = make_api("operator", staff_perms=[VIEW])
    actor = make_api("lead-operator", staff_perms=["queues.act_on_queue_panel"])
    staff_without = make_api("staff-other", staff_perms=["queues.view_deadletter"])
    not_staff = make_api("perm-not-staff")
    not_staff.user.user_permissions.add(*viewer.user.user_permissions.all())
    assert viewer.get(f"/jobs/{job_id}/").status_code == 200
    assert actor.get(f"/jobs/{job_id}/").status_code == 200
    assert staff_without.get(f"/jobs/{job_id}/").status_code == 404
    assert not_staff.get(f"/jobs/{job_id}/").status_code == 404  # the permission counts for staff only


def test_a_job_enqueued_outside_the_api_has_no_owner_and_answers_staff_only(seller_a, make_api):
    job = queues.enqueue("orders-sync", "features.orders.jobs.sync_cabinet", 5)
    assert "owner" not in job.meta
    assert seller_a.get(f"/jobs/{job.id}/").status_code == 404
    assert make_api("operator", staff_perms=[VIEW]).get(f"/jobs/{job.id}/").status_code == 200


def test_another_users_cabinet_is_a_404_that_gives_away_no_job_id(seller_a, seller_b):
    job_id = sync(seller_a, 5)
    refused = post(seller_b, "/features/orders/sync/", {"cabinet_id": 5})
    nobodys = post(seller_b, "/features/orders/sync/", {"cabinet_id": 77})
    assert refused.status_code == 404
    assert refused.json() == {"detail": "No cabinet 5 among yours (cabinet_id=5)."}
    assert nobodys.json() == {"detail": "No cabinet 77 among yours (cabinet_id=77)."}  # same answer: no oracle
    assert job_id not in refused.content.decode()
    assert queues.get_queue("orders-sync").get_job_ids() == [job_id]


def test_another_users_product_is_a_404_for_the_repricer_and_for_content(seller_a, seller_b):
    price = reprice(seller_b, 111, "10.00", "promo")
    content = post(seller_b, "/features/content/", {"product_id": 111, "prompt": "socks"})
    for response in (price, content):
        assert response.status_code == 404
        assert response.json() == {"detail": "No product 111 among yours (product_id=111)."}
    assert ContentGeneration.objects.count() == 0
    assert queues.get_queue("repricer").get_job_ids() == []


def test_the_same_idempotency_key_from_two_users_gives_two_jobs(seller_a, seller_b):
    first = reprice(seller_a, 111, "10.00", "promo-1")
    again = reprice(seller_a, 111, "10.00", "promo-1")
    other = reprice(seller_b, 222, "12.00", "promo-1")
    assert first.status_code == again.status_code == other.status_code == 202
    assert again.json()["job_id"] == first.json()["job_id"]  # the owner's own waiting job
    assert other.json()["job_id"] != first.json()["job_id"]
    job = queues.fetch_job(other.json()["job_id"])
    assert job.args == [222, "12.00", "promo-1", seller_b.user.pk]
    assert job.meta["owner"] == seller_b.user.pk


def test_an_idempotency_key_is_unique_per_owner_in_the_database(seller_a, seller_b):
    a, b = seller_a.user, seller_b.user
    PriceChange.objects.create(owner=a, idempotency_key="k", product_id=111, price="10.00")
    PriceChange.objects.create(owner=b, idempotency_key="k", product_id=222, price="12.00")
    PriceChange.objects.create(owner=None, idempotency_key="k", product_id=1, price="1.00")
    with pytest.raises(IntegrityError), transaction.atomic():
        PriceChange.objects.create(owner=a, idempotency_key="k", product_id=111, price="11.00")
    with pytest.raises(IntegrityError), transaction.atomic():  # rows from before owners: the key alone
        PriceChange.objects.create(owner=None, idempotency_key="k", product_id=2, price="2.00")
    assert PriceChange.objects.count() == 3


def test_price_changes_of_two_owners_with_one_key_are_both_applied_and_a_reuse_names_only_your_own(
    seller_a, seller_b, marketplace, settings
):
    from features.repricer.jobs import apply_price

    settings.MARKETPLACE_URL = marketplace.url
    a, b = seller_a.user.pk, seller_b.user.pk
    assert apply_price(111, "10.00", "promo", a)["applied"] is True
    assert apply_price(222, "12.00", "promo", b)["applied"] is True  # not a duplicate of A's on the marketplace
    with pytest.raises(queues.PermanentError) as caught:
        apply_price(111, "99.00", "promo", a)
    assert "already used for product 111 at 10.00" in str(caught.value)
    assert "222" not in str(caught.value) and "12.00" not in str(caught.value)
    assert sorted(PriceChange.objects.values_list("owner_id", "product_id", "status")) == sorted(
        [(a, 111, "applied"), (b, 222, "applied")]
    )
    assert marketplace.statuses("/api/v1/products/") == [200, 200]


def test_content_rows_record_their_owner(seller_a):
    response = post(seller_a, "/features/content/", {"product_id": 111, "prompt": "warm socks"})
    assert response.status_code == 202
    assert ContentGeneration.objects.get().owner == seller_a.user


def test_anonymous_callers_are_refused_outside_dev():
    with override_settings(OPTIMA_ENV="test"):
        assert post(APIClient(), "/features/orders/sync/", {"cabinet_id": 5}).status_code == 401
        assert APIClient().get("/jobs/abc/").status_code == 401


@override_settings(OPTIMA_ENV="dev")
def test_in_dev_anonymous_callers_are_one_owner_who_may_use_any_cabinet_or_product(seller_a):
    anonymous, other_anonymous = APIClient(), APIClient()
    job_id = sync(anonymous, 1)  # nobody's yet: created for the dev owner on first use
    cabinet = Cabinet.objects.get(cabinet_id=1)
    assert cabinet.owner.username == DEV_ANONYMOUS_USERNAME
    assert not cabinet.owner.is_active and not cabinet.owner.has_usable_password()
    assert queues.fetch_job(job_id).meta["owner"] == "anonymous"
    assert other_anonymous.get(f"/jobs/{job_id}/").status_code == 200  # every anonymous caller is one owner
    assert seller_a.get(f"/jobs/{job_id}/").status_code == 404  # a signed-in user is not that owner

    a_job = sync(seller_a, 5)
    assert anonymous.get(f"/jobs/{a_job}/").status_code == 404
    assert sync(anonymous, 5) != a_job  # A's cabinet may be used, but A's waiting job is not handed out
    assert post(anonymous, "/features/content/", {"product_id": 111, "prompt": "socks"}).status_code == 202
    assert reprice(anonymous, 9, "5.00", "promo").status_code == 202
    assert Product.objects.get(product_id=9).owner.username == DEV_ANONYMOUS_USERNAME
    assert User.objects.filter(username=DEV_ANONYMOUS_USERNAME).count() == 1
