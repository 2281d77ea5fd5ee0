"""The orders torch's CPU kernels leave where the result's order is not fixed by the values: topk's k elements with
sorted=False and the places of its equal elements with sorted=True, equal elements (nan included) under sort with
stable=False, and which of equal elements kthvalue and mode return. Programs read them in that order (a
cross-entropy planner writes new samples over the k worst, position by position; a mixture of experts with gates
initialised at zero routes each row to the experts torch's topk names first; ties keep torch's positions).

topk fills a queue with the (value, index) pairs of a row and, when k * 64 <= n, runs std::partial_sort on it (heap
selection, then sorting the heap), else std::nth_element (introselect: median-of-three partitions, insertion sort
below four elements, heap selection past 2 log2(n) partitions) followed, with sorted=True, by a std::sort of the
first k - 1 pairs, and returns the queue's first k pairs; sort runs
std::sort on the pairs (introsort: the same partitions down to 16 elements, heap sort past 2 log2(n), then an
insertion sort over the whole). Each is replayed here step by step as the C++ standard library (libstdc++) performs
it, comparing values only, nan above every number for the largest (descending) and below for the smallest; on the
host, row by row. kthvalue runs torch's own quickselect, mode a std::sort (kth_smallest_index, mode_index)."""

import numpy as np


def topk_order(rows, k, largest, sorted):  # noqa: A002
    """The indices torch's CPU topk(k, largest, sorted) returns for each row of `rows` (..., n): (..., k). With
    sorted=True the nth_element path then std::sorts the first k - 1 pairs, which fixes where equal values land."""
    flat = np.asarray(rows).reshape(-1, rows.shape[-1])
    before = _before_largest if largest else _before_smallest
    out = np.empty((flat.shape[0], k), np.int64)
    for r, row in enumerate(flat.tolist()):
        queue = list(zip(row, range(len(row))))
        if k * 64 <= len(queue):
            _heap_select(queue, 0, k, len(queue), before)
            _sort_heap(queue, 0, k, before)
        elif k:
            _nth_element(queue, k - 1, before)
            if sorted:
                _std_sort(queue, 0, k - 1, before)
        out[r] = [index for _, index in queue[:k]]
    return out.reshape(*rows.shape[:-1], k)


def unstable_sort_order(rows, descending):
    """The indices torch's CPU sort(descending, stable=False) gives for each row of `rows` (..., n)."""
    flat = np.asarray(rows).reshape(-1, rows.shape[-1])
    before = _before_largest if descending else _before_smallest
    out = np.empty(flat.shape, np.int64)
    for r, row in enumerate(flat.tolist()):
        queue = list(zip(row, range(len(row))))
        _std_sort(queue, 0, len(queue), before)
        out[r] = [index for _, index in queue]
    return out.reshape(rows.shape)


def _std_sort(q, first, last, before):
    """std::sort over q[first:last]: introsort down to 16 elements, then one insertion sort over the whole."""
    _introsort(q, first, last, 2 * ((last - first).bit_length() - 1), before)
    if last - first > 16:
        _insertion_sort(q, first, first + 16, before)
        for i in range(first + 16, last):  # the first 16 hold the smallest: no bound check needed below them
            _shift_down(q, i, before)
    else:
        _insertion_sort(q, first, last, before)


def kth_smallest_index(rows, k):
    """The index torch's CPU kthvalue(k + 1) gives for each row of `rows` (..., n): its own quickselect (a median of
    three moved to the front, Hoare partitions), nan above every number."""
    flat = np.asarray(rows).reshape(-1, rows.shape[-1])
    out = np.empty(flat.shape[0], np.int64)
    for r, row in enumerate(flat.tolist()):
        queue = list(zip(row, range(len(row))))
        _quick_select(queue, k, _before_largest)
        out[r] = queue[k][1]
    return out.reshape(rows.shape[:-1])


def mode_index(rows):
    """The index torch's CPU mode gives for each row of `rows` (..., n) holding no nan: it sorts the row with
    std::sort and takes the first of the longest runs of equal values, at the run's last position."""
    flat = np.asarray(rows).reshape(-1, rows.shape[-1])
    orders = unstable_sort_order(flat, False)
    out = np.empty(flat.shape[0], np.int64)
    for r, (row, order) in enumerate(zip(flat, orders)):
        ends = np.flatnonzero(np.append(row[order][1:] != row[order][:-1], True))  # each run's last position
        lengths = np.diff(np.append(-1, ends))
        out[r] = order[ends[np.argmax(lengths)]]
    return out.reshape(rows.shape[:-1])


def _quick_select(q, k, greater):
    low, high = 0, len(q) - 1
    while high > low:
        if high == low + 1:
            if greater(q[low], q[high]):
                q[low], q[high] = q[high], q[low]
            return
        middle = low + (high - low) // 2
        q[middle], q[low + 1] = q[low + 1], q[middle]
        for a, b in ((low + 1, high), (low, high), (low + 1, low)):
            if greater(q[a], q[b]):
                q[a], q[b] = q[b], q[a]
        i, j, pivot = low + 1, high, q[low]
        while True:
            i += 1
            while greater(pivot, q[i]):
                i += 1
            j -= 1
            while greater(q[j], pivot):
                j -= 1
            if j < i:
                break
            q[i], q[j] = q[j], q[i]
        q[low], q[j] = q[j], q[low]
        if j <= k:
            low = i
        if j >= k:
            high = j - 1


def _introsort(q, first, last, depth, before):
    while last - first > 16:
        if depth == 0:
            _heap_select(q, first, last, last, before)
            _sort_heap(q, first, last, before)
            return
        depth -= 1
        cut = _partition_around_median(q, first, last, before)
        _introsort(q, cut, last, depth, before)
        last = cut


def _before_largest(x, y):
    return (x[0] != x[0] and y[0] == y[0]) or x[0] > y[0]


def _before_smallest(x, y):
    return (x[0] == x[0] and y[0] != y[0]) or x[0] < y[0]


def _nth_element(q, nth, before):
    first, last = 0, len(q)
    depth = 2 * (len(q).bit_length() - 1)
    while last - first > 3:
        if depth == 0:
            _heap_select(q, first, nth + 1, last, before)
            q[first], q[nth] = q[nth], q[first]
            return
        depth -= 1
        cut = _partition_around_median(q, first, last, before)
        if cut <= nth:
            first = cut
        else:
            last = cut
    _insertion_sort(q, first, last, before)


def _partition_around_median(q, first, last, before):
    """The median of q[first + 1], q[middle], q[last - 1] moved to q[first], then the rest partitioned around it."""
    a, b, c = first + 1, first + (last - first) // 2, last - 1
    if before(q[a], q[b]):
        median = b if before(q[b], q[c]) else (c if before(q[a], q[c]) else a)
    else:
        median = a if before(q[a], q[c]) else (c if before(q[b], q[c]) else b)
    q[first], q[median] = q[median], q[first]
    low, high = first + 1, last
    while True:
        while before(q[low], q[first]):
            low += 1
        high -= 1
        while before(q[first], q[high]):
            high -= 1
        if low >= high:
            return low
        q[low], q[high] = q[high], q[low]
        low += 1


def _insertion_sort(q, first, last, before):
    for i in range(first + 1, last):
        value = q[i]
        if before(value, q[first]):
            q[first + 1 : i + 1] = q[first:i]
            q[first] = value
            continue
        _shift_down(q, i, before)


def _shift_down(q, i, before):
    """q[i] moved down past the elements it comes before (one that it does not is known to lie below)."""
    value, j = q[i], i
    while before(value, q[j - 1]):
        q[j] = q[j - 1]
        j -= 1
    q[j] = value


def _heap_select(q, first, middle, last, before):
    """The `middle - first` elements that come first moved into a heap at q[first:middle]."""
    size = middle - first
    for parent in range((size - 2) // 2, -1, -1) if size >= 2 else ():
        _adjust_heap(q, first, parent, size, q[first + parent], before)
    for i in range(middle, last):
        if before(q[i], q[first]):
            value, q[i] = q[i], q[first]
            _adjust_heap(q, first, 0, size, value, before)


def _sort_heap(q, first, last, before):
    while last - first > 1:
        last -= 1
        value, q[last] = q[last], q[first]
        _adjust_heap(q, first, 0, last - first, value, before)


def _adjust_heap(q, first, hole, size, value, before):
    """Sift the hole at `hole` down to a leaf along the larger children, then push `value` up from there."""
    top, child = hole, hole
    while child < (size - 1) // 2:
        child = 2 * (child + 1)
        if before(q[first + child], q[first + child - 1]):
            child -= 1
        q[first + hole] = q[first + child]
        hole = child
    if size % 2 == 0 and child == (size - 2) // 2:
        child = 2 * (child + 1)
        q[first + hole] = q[first + child - 1]
        hole = child - 1
    parent = (hole - 1) // 2
    while hole > top and before(q[first + parent], value):
        q[first + hole] = q[first + parent]
        hole = parent
        parent = (hole - 1) // 2
    q[first + hole] = value
