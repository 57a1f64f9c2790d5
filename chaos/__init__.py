"""``rmq-chaos``: randomized faults against a real local cluster, with checkers of what was lost.

The harness starts a preset (:mod:`admin.cluster`'s processes), runs a bounded workload of Python-SDK
producers and one push-consumer group (:mod:`chaos.workload`), injects faults chosen by a seeded random
nemesis (:mod:`chaos.nemesis`), heals, drains, reads every queue of every master and slave independently
(:mod:`chaos.reader`) and runs pure checkers over the recorded history (:mod:`chaos.checkers`). The
result is a JSON file, a table and a hand-written SVG timeline (:mod:`chaos.report`).

It is a tool on top of the product (the floor of ``admin``): it imports the client, admin, common, remoting
and store, and nothing imports it.
"""
