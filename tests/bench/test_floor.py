"""The floor behind the ``limit`` column: transfers + the lazy-mode graph's execution."""

from bench.accuracy import Comparison
from bench.measure import PeerRun
from bench.runner import floor_phases


class FixedTransfers:
    def seconds(self):
        return {"transfer_in": 0.001, "transfer_out": 0.0005}


def run(name, execute, ok=True):
    peer = PeerRun(name, first_call_s=1.0, times_s=[0.1] * len(execute), execute_s=list(execute))
    peer.accuracy = None if name == "xla_lazy" else Comparison(ok)
    return peer


def test_execution_is_the_smallest_median_of_the_peers_running_the_lazy_graph():
    """Execution-time noise must not lift trace_once over the limit: its own median counts."""
    runs = {"xla_lazy": run("xla_lazy", [0.050, 0.052, 0.051]),
            "torchxla_trace_once": run("torchxla_trace_once", [0.048, 0.047, 0.049]),
            "openxla_eval": run("openxla_eval", [0.030, 0.030, 0.030])}   # its own graph: not counted
    phases = floor_phases(None, runs, FixedTransfers(), None, 0)
    assert phases == {"transfer_in": 0.001, "transfer_out": 0.0005, "execute": 0.048}


def test_a_wrong_peer_does_not_lower_the_floor():
    runs = {"xla_lazy": run("xla_lazy", [0.050]),
            "torchxla_trivial": run("torchxla_trivial", [0.010], ok=False)}
    assert floor_phases(None, runs, FixedTransfers(), None, 0)["execute"] == 0.050
