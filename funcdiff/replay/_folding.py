"""Instructions of constants alone, computed once instead of at every replay.

A recorded derivative computes with constants of its own: the seeds that start its
products, and whatever the function does to them. A prepared sparse Jacobian pushes
its colour groups through the function: the Brusselator's periodic Laplacian applied
to them is 27 of its program's 74 instructions, every ``np.roll`` among them, and none
reads the point. Such an instruction gives the same arrays at every call, so the
generated NumPy code computes it once, when it is made (by the NumPy call itself: the
values are the ones every replay computed), and reads the results as constants.

That trades memory for time: the folded results a program keeps can be larger than
the constants they came from (the Brusselator's 6 x 200,000 seeds fold into six
arrays of 6 x 100,000). A program folds only where the results it keeps take at most
:data:`GROWTH` times the bytes of its constant arrays.

Only instructions after the program's last in-place write are folded (those before
it run in order on the arrays it writes), never a guard, and never one that computes
an output (the caller must get an array of its own). The compiled kernels
(:mod:`funcdiff.replay.jit`) do not fold: XLA computes the seeds' expressions faster
than it reads their results from memory.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from funcdiff.replay._codegen import as_call, slots_used

__all__ = ["GROWTH", "folded"]

#: How many times the bytes of a program's constant arrays the folded results may add.
GROWTH = 4


def _evaluate(call: tuple, values: list, ops: dict) -> list | None:
    """The arrays a call instruction computes from ``values`` (as the interpreter runs
    it), or None where it fails or gives something other than ndarrays (it then stays
    an instruction)."""
    fn, args, kwargs, outs = call
    fill = ops["fill"]
    try:
        with np.errstate(all="ignore"):  # every replay computes these; warnings aside
            result = fn(*fill(args, values), **{k: fill(v, values) for k, v in kwargs.items()})
    except Exception:  # noqa: BLE001  (left as an instruction: it fails or not as recorded)
        return None
    arrays = ops["unpack"](result, len(outs))
    if len(arrays) != len(outs) or not all(type(a) is np.ndarray for a in arrays):
        return None
    return arrays


def folded(code: list, template: list, outputs: set[int], ops: dict) -> tuple[list, list]:
    """``(code, template)`` with the instructions whose every input is a constant
    computed once: removed from ``code``, their results (those still read) constants of
    the new ``template``. ``code`` and ``template`` themselves where nothing folds or
    the constants would grow more than :data:`GROWTH` times.

    ``outputs`` are the program's output slots; ``ops`` names its opcodes and helpers
    (see ``funcdiff.replay.program``).
    """
    writes = [k for k, ins in enumerate(code) if ins[0] in ops["inplace_kinds"]]
    values = list(template)
    gone: set[int] = set()
    for k in range(writes[-1] + 1 if writes else 0, len(code)):
        call = as_call(code[k], ops)
        if call is None or call[0] is None:  # not a call, or a copy (nothing to save)
            continue
        outs = call[3]
        reads = [s for s in slots_used(code[k], ops) if s not in outs]
        if not reads or any(values[s] is None for s in reads) or outputs.intersection(outs):
            continue
        arrays = _evaluate(call, values, ops)
        if arrays is None:
            continue
        for s, a in zip(outs, arrays):
            values[s] = a
        gone.add(k)
    if not gone:
        return code, template
    kept = [ins for k, ins in enumerate(code) if k not in gone]
    read = {s for ins in kept for s in slots_used(ins, ops)}  # (their outputs too)
    new = [v if template[s] is not None or s in read else None for s, v in enumerate(values)]
    before = _held(v for v in template if type(v) is np.ndarray)
    added = _held([v for s, v in enumerate(new) if template[s] is None and v is not None], before)
    if sum(added.values()) > GROWTH * sum(before.values()):
        return code, template
    originals = {id(v) for v in template}
    for s, v in enumerate(new):
        if template[s] is None and v is not None and id(v) not in originals:
            # Read only, so that a result handed out as it is gets copied (``_emit``)
            # rather than shared with every later call.
            v.flags.writeable = False
    return kept, new


def _held(arrays: Any, known: dict[int, int] | None = None) -> dict[int, int]:
    """The bytes ``arrays`` keep alive, by ``id`` of the array owning them (a view keeps
    its whole base), leaving out those ``known`` already counts."""
    held: dict[int, int] = {}
    for a in arrays:
        while isinstance(a.base, np.ndarray):
            a = a.base
        if known is None or id(a) not in known:
            held[id(a)] = a.nbytes
    return held
