"""The system under test: what LoadGen's ``issue_queries`` reaches.

``core`` (the SUT, its dispatch per scenario and its drain) with its paths: ``inline``
(SingleStream on LoadGen's thread), ``server`` (the Server worker loop, paced by
``server_policy`` and ``server_queue``) and ``workers`` (worker processes: ``ring``,
``worker_loop``); ``watchdog``, ``inflight``, ``failures`` and ``batch_stats`` are the
bookkeeping that keeps every sample answered and counted.
"""
