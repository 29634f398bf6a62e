"""One node of the distributed test (test_dist.py): the role comes from DMLC_ROLE."""
import os
import sys

import kvstore
from kvstore import kv, nd

role = os.environ["DMLC_ROLE"]
store = kv.create("dist_sync")
assert store.is_capable(kv.KVStore.OPTIMIZER)  # every role: workers ship specs to servers
if role in ("server", "scheduler"):
    if role == "server":
        def update(key, recv, stored):
            print("server update", key, flush=True)
            stored += recv * 2

        store._set_updater(update)

    def controller(head, body):
        print("controller", head, body, flush=True)
        if head == 7:
            raise ValueError("bad command %s" % body)
        if head == 1 and body == "hello0":
            # Closing the store whose RunServer is running this controller: refused, and the
            # store stays open (the server goes on serving).
            try:
                store.close()
                print("controller close: closed", flush=True)
            except kvstore.BusyError as exc:
                print("controller close:", exc.name, "closed" if store.closed else "open",
                      flush=True)

    store.run_server(controller)
    print(role, "done", flush=True)
    sys.exit(0)

rank = store.rank
print("worker", rank, store.num_workers, store.type, flush=True)
shape = (2, 3)
store.init(3, nd.ones(shape))
store.push(3, nd.ones(shape) * (rank + 1))
out = nd.zeros(shape)
store.pull(3, out=out)
pending = len(store._pending_outputs)  # the pull may still be writing out
nd.waitall()
print("pulled", out.asnumpy().ravel().tolist(), "pending", pending,
      len(store._pending_outputs), flush=True)
store._send_command_to_servers(1, "hello%d" % rank)
try:
    store._send_command_to_servers(7, "boom")
except Exception as exc:
    print("command error", type(exc).__name__, flush=True)
store._barrier()
store.close()
print("worker done", flush=True)
