"""Each device's GPU operations: put together, one stretch of the operations each, and found.

An export of tensor-parallel ranks holds one process per GPU, their operations interleaved in
time (nsys writes each table's rows as they come). Each rank's analysis reads its own device's
operations several times; :func:`by_device` puts each device's rows together once, after the
read (:attr:`.loader.Trace.ops`), so that they are a stretch of every column, taken without a
copy (:func:`device_rows`, :func:`device_stretches`). :func:`grouped_rows` is the same
reordering by any small-integer column (each CUDA API call's process:
:func:`.callrows.calls_by_process`). What every process' analysis asks of one operations
frame is worked out once for it (:func:`per_ops_frame`).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from specscope.analysis.memory import one_valued
from specscope.analysis.opsums import DeviceScatter, distinct_counts, present_values
from specscope.analysis.pagerelease import only_here
from specscope.analysis.parallel import beside

if TYPE_CHECKING:
    from specscope.analysis.loader import Trace


def by_device(columns: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """:func:`grouped_rows` of the operations' ``columns`` by device."""
    return grouped_rows(columns, "device_id")


def grouped_rows(columns: dict[str, np.ndarray], key: str) -> dict[str, np.ndarray]:
    """``columns`` with the rows of each value of column ``key`` (small integers: the
    operations' devices, or in :func:`.callrows.calls_by_process` each call's process)
    together, in the order of those values (each one's rows in the order they had), so that
    each device's operations are a stretch of :attr:`.loader.Trace.ops`
    (:func:`.steps.find_steps` takes them without a copy); ``columns`` as they are when they
    are so already (one device: the usual case).

    An export of tensor-parallel ranks holds one process per GPU, their operations
    interleaved in time; each rank's analysis reads its device's operations. Copying those
    out per rank held every operation twice (8 M operations of 4 ranks: 0.4 GB more) and
    read every column once per rank; the reordering is one pass per column, each column's
    pages given up as it is read (:func:`_gathered`), the columns shared out between two
    threads (:func:`_shares`, :func:`.parallel.beside`: the moves let go of the GIL). Columns of one
    value (:func:`.memory.one_value_view`) stay so; a :class:`FewRows` column is moved by the
    places of its rows."""
    device = columns[key]
    if in_device_order(device):
        return columns
    lo, hi = int(device.min()), int(device.max())
    near = hi - lo < 1 << 16  # (device ids: small numbers, counted without a sort)
    if near and (ids := present_values(device, lo, hi)) is not None:
        scatter = DeviceScatter(device, ids)  # (the C loops: opsums.py; its counts)
    else:
        ids, counts = distinct_counts(device)
        scatter = DeviceScatter(device, ids, counts)
    names = list(columns)  # (their order)
    grouped = {key: np.repeat(ids.astype(_narrowest(ids, device.dtype)), scatter.counts)}
    for name in [name for name, values in columns.items() if isinstance(values, FewRows)]:
        few = columns.pop(name)  # (their places, in the order of the places)
        places = scatter.places(few.rows)
        by_place = np.argsort(places, kind="stable")
        grouped[name] = FewRows(places[by_place], few.values[by_place], few.n)
    # each column moved in C (the order of the rows never made), else the reference: each
    # column gathered in the order of the rows
    order = scatter if scatter.fn is not None else scatter.rows
    del columns[key], device
    mine, theirs = _shares(columns)
    del columns  # (each column held by one share alone: given up once gathered)
    other = beside(len(grouped[key]), _gathered, theirs, order)
    del theirs  # (the thread's now)
    grouped |= _gathered(mine, order)
    grouped |= other.result()
    return {name: grouped[name] for name in names}


@dataclass(frozen=True)
class FewRows:
    """A column of ``n`` rows that are 0 but at ``rows`` (increasing), which hold ``values``:
    the bytes of the operations (copies and memsets only, a few in a hundred) while
    :func:`grouped_rows` moves the others, which moves these by their places alone (8 ranks
    of 2.5 M GPU operations: 76 MB of int32 given up before the regrouping)."""

    rows: np.ndarray
    values: np.ndarray
    n: int

    @classmethod
    def of(cls, column: np.ndarray) -> FewRows:
        rows = np.flatnonzero(column)
        return cls(rows, column[rows], len(column))

    def dense(self) -> np.ndarray:
        """The column, every row (zeros from ``np.zeros``: pages never written stay unmapped)."""
        out = np.zeros(self.n, dtype=self.values.dtype)
        out[self.rows] = self.values
        return out


def _narrowest(ids: np.ndarray, dtype: np.dtype) -> np.dtype:
    """The narrowest of int8, int16 and ``dtype`` (an integer type) that holds ``ids``: the
    grouped column of :func:`grouped_rows`, made again from them (the operations' devices:
    int8, 60 MB less at 20 M operations), as :func:`.memory.narrow_ids` narrows stream ids."""
    for small in (np.int8, np.int16):
        if np.dtype(small).itemsize >= np.dtype(dtype).itemsize:
            break
        info = np.iinfo(small)
        if not len(ids) or (info.min <= ids.min() and ids.max() <= info.max):
            return np.dtype(small)
    return np.dtype(dtype)


def _shares(columns: dict[str, np.ndarray]) -> tuple[dict, dict]:
    """``columns`` (popped) in two shares of about as many bytes for :func:`_gathered` on two
    threads: the largest first, each to the share with fewer bytes so far (a column of one
    value has none)."""
    shares: tuple[dict, dict] = ({}, {})
    load = [0, 0]
    for name in sorted(columns, key=lambda c: -_bytes(columns[c])):
        k = 0 if load[0] <= load[1] else 1
        shares[k][name] = columns.pop(name)
        load[k] += _bytes(shares[k][name])
    return shares


def _bytes(values: np.ndarray) -> int:
    return 0 if values.strides == (0,) else values.nbytes


def in_device_order(device: np.ndarray) -> bool:
    """Whether the device ids come in order (:func:`by_device` leaves them as they are)."""
    return len(device) < 2 or device.strides == (0,) or not (device[1:] < device[:-1]).any()


def _gathered(
    columns: dict[str, np.ndarray], order: np.ndarray | DeviceScatter
) -> dict[str, np.ndarray]:
    """Each of ``columns`` in ``order`` (one-value columns as they are), each column given up
    (popped) once gathered; by :class:`.opsums.DeviceScatter` where it is given and takes the
    column, which reads a column that nothing else holds in stretches and gives each one's
    pages back once read (:func:`.pagerelease.read_once`): a column is not held twice while it
    moves. Whole columns moved at once on two threads, an 8-byte and a 4-byte one new at once,
    were the peak at 20 M GPU operations of 8 ranks (``bench/README.md``, twentieth
    session)."""
    out = {}
    for name in list(columns):
        values = columns.pop(name)
        if values.strides == (0,):
            out[name] = values
        elif isinstance(order, DeviceScatter):
            alone = only_here(values)  # (before the call: its arguments hold the column too)
            moved = order.column(values, alone)
            out[name] = moved if moved is not None else values[order.rows]
        else:
            out[name] = values[order]
        del values
    return out


def per_ops_frame(trace: Trace, name: str, compute):
    """``compute(trace.ops)``, kept on ``trace`` as ``name`` until its operations frame is
    another (:func:`.validate.validated` drops rows by replacing it): what every process of
    an export asks of the same frame is worked out once, not once per process."""
    ops = trace.ops
    kept = trace.__dict__.get(name)
    if kept is None or kept[0]() is not ops:
        kept = (weakref.ref(ops), compute(ops))
        trace.__dict__[name] = kept
    return kept[1]


def process_devices(trace: Trace) -> dict[int, list[int]]:
    """Each process with GPU operations -> the devices they ran on (sorted), in one pass over
    the operations, not one per process (8 ranks of 1 M operations each: 8 passes over all
    8 M); worked out again only for another operations frame (:func:`.validate.validated`
    drops rows by replacing it)."""
    stretches = device_stretches(trace)
    return per_ops_frame(trace, "_process_devices", lambda ops: _by_process(ops, stretches))


def _by_process(ops: pd.DataFrame, stretches: dict[int, slice] | None) -> dict[int, list[int]]:
    """:func:`process_devices` of ``ops``: from the pids of each device's stretch where the
    devices come in order (:func:`device_stretches`; most often one pid each), else from the
    distinct (pid, device) pairs."""
    pid, device = ops["pid"].to_numpy(), ops["device_id"].to_numpy()
    found: dict[int, list[int]] = {}
    if stretches is not None:
        for d, rows in stretches.items():
            pids = pid[rows]
            for p in [pids[0]] if one_valued(pids) else pd.unique(pids):
                found.setdefault(int(p), []).append(d)
    else:
        pairs = pd.unique((pid.astype(np.int64) << 32) | (device.astype(np.int64) & 0xFFFFFFFF))
        for pair in pairs.tolist():
            found.setdefault(pair >> 32, []).append(
                int(np.uint32(pair & 0xFFFFFFFF).astype(np.int32))
            )
    return {p: sorted(found[p]) for p in sorted(found)}


def device_rows(trace: Trace, device_id: int) -> slice | np.ndarray:
    """The rows of ``trace.ops`` on ``device_id``: a slice where each device's rows are one
    stretch (:func:`by_device`; the stretches found once per frame), else their positions."""
    stretches = device_stretches(trace)
    if stretches is not None:
        return stretches.get(device_id, slice(0, 0))
    return np.flatnonzero(trace.ops["device_id"].to_numpy() == device_id)


def device_stretches(trace: Trace) -> dict[int, slice] | None:
    """Device -> its stretch of ``trace.ops`` where the devices come in order (one device, or
    :func:`by_device`), else None; found once per frame."""
    return per_ops_frame(trace, "_device_stretches", _stretches)


def _stretches(ops: pd.DataFrame) -> dict[int, slice] | None:
    devices = ops["device_id"].to_numpy()
    if len(devices) and devices.strides == (0,):  # (one device, a view: no pass over it)
        return {int(devices[0]): slice(0, len(devices))}
    if not in_device_order(devices):
        return None
    edges = np.flatnonzero(devices[1:] != devices[:-1]) + 1
    starts, ends = np.r_[0, edges], np.r_[edges, len(devices)]
    return {
        int(devices[a]): slice(int(a), int(b)) for a, b in zip(starts, ends, strict=True) if b > a
    }
