"""``rmq-chaos``: randomized faults against a real local cluster, with checkers of what was lost.

The harness starts a preset (:mod:`pocketmq.admin.cluster`'s processes), runs a bounded workload of Python-SDK
producers and one push-consumer group (:mod:`pocketmq.chaos.workload`), injects faults chosen by a seeded random
nemesis (:mod:`pocketmq.chaos.nemesis`), heals, drains, reads every queue of every master and slave independently
(:mod:`pocketmq.chaos.reader`) and runs pure checkers over the recorded history (:mod:`pocketmq.chaos.checkers`). The
result is a JSON file, a table and a hand-written SVG timeline (:mod:`pocketmq.chaos.report`).

It is a tool on top of the product (the floor of ``admin``): it imports the client, admin, common, remoting
and store, and nothing imports it.
"""
