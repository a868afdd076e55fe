"""Who owns what: seller cabinets and products, each with an owner (a user of the site).

The feature endpoints serve a cabinet or product only to its owner (404 to anyone else), and
record the owner of every job they enqueue (``owners.py``). docs/api.md, "Owners".
"""
