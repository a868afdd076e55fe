"""The permissions of the queues app, by the names ``user.has_perm`` takes (public: ``queues.VIEW_QUEUE_PANEL``,
``queues.ACT_ON_QUEUE_PANEL``). Leaf module: the codenames are declared on ``queues.models``' Meta, and a
codename is never renamed (groups and users in the database hold it)."""

VIEW_QUEUE_PANEL = "queues.view_queue_panel"  # read the panel, every job's status
ACT_ON_QUEUE_PANEL = "queues.act_on_queue_panel"  # act in the panel (pause, requeue, delete, empty); implies viewing
