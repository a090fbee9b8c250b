"""Build a guard function by hand, as the tracer would, for a frame with given arguments."""

import builtins

from guards import FrameInfo, build_guard_function


def frame_of(*arg_names, f_globals=None):
    return FrameInfo(tuple(arg_names), f_globals if f_globals is not None else {}, builtins.__dict__)


def guard_fn_for(guards, *arg_names, f_globals=None):
    return build_guard_function(guards, frame_of(*arg_names, f_globals=f_globals))


def some_function(*args):
    """Stands for the frame's function when no global or closure is read."""
