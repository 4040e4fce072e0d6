/* One pass over the GPU operations for the per-step sums of specscope.analysis.metrics,
   .gaps and .coverage, and for what the operations frame needs first (launch calls, name
   codes, each device's rows together), where numpy makes a dozen (a temporary per operation
   each).

   Each function is the C loop of a numpy reference that stays in Python beside its caller
   (specscope.analysis.opsums says which), with the same results to the bit: integer sums are
   kept as integers, float sums add whole numbers (exact below 2**53), and every choice
   between rows is the one the reference makes. An index outside the range the reference
   expects (a group below -1 or past the end, a code past its table) returns -1 before
   anything is trusted, and the caller runs the reference, which fails or not as before.

   Integer columns come as they are stored (int8, int16, int32 or int64: `w` is the width in
   bytes), so that nothing of the operations' size is converted first. Built by
   specscope.analysis.native with the system's C compiler; no Python API is used (numpy
   buffers through ctypes, which lets go of the GIL during the call). */

#include <math.h>
#include <stdint.h>

static inline int64_t at(const void *p, int w, int64_t i) {
    switch (w) {
    case 1: return ((const int8_t *)p)[i];
    case 2: return ((const int16_t *)p)[i];
    case 4: return ((const int32_t *)p)[i];
    default: return ((const int64_t *)p)[i];
    }
}

/* A step number's entry of `where` (n_where entries, the last one for step -1). */
static inline int position(const int64_t *where, int64_t n_where, int64_t step, int64_t *pos) {
    if (step < -1 || step >= n_where - 1) return 0;
    *pos = where[step < 0 ? n_where - 1 : step];
    return 1;
}

/* metrics.group_first_last: per group the least start and the greatest end of its rows; group -1
   goes to the last slot. first and last hold n_groups + 1 entries, INT64_MAX and INT64_MIN. */
int64_t first_last(int64_t n, const void *group, int gw, int64_t n_groups, const int64_t *start,
                   const int64_t *end, int64_t *first, int64_t *last) {
    for (int64_t i = 0; i < n; i++) {
        int64_t g = at(group, gw, i);
        if (g < -1 || g >= n_groups) return -1;
        if (g < 0) g = n_groups;
        if (start[i] < first[g]) first[g] = start[i];
        if (end[i] > last[g]) last[g] = end[i];
    }
    return 0;
}

/* metrics._class_counts without the patterns: ops per (kept step, class; int32), class = (kind *
   2 + in_graph) * n_copy + copy + 1; eager copy bytes per kept step; and the (kept step,
   correlation id) of the graph operations of kept steps, consecutive repeats dropped, into
   launch_pos and launch_corr (n entries each). Returns how many launches, or -1. */
int64_t class_counts(int64_t n, const void *step, int sw, const int64_t *where, int64_t n_where,
                     const int8_t *kind, int64_t n_kind, const uint8_t *in_graph,
                     const int8_t *copy, const void *nbytes, int bw, const void *corr, int cw,
                     int64_t n_copy, int64_t memcpy_kind, int64_t unified, int64_t n_kept,
                     int32_t *by_class, double *eager_bytes, int64_t *launch_pos,
                     int64_t *launch_corr) {
    int64_t n_class = n_kind * 2 * n_copy, launches = 0, pos;
    for (int64_t i = 0; i < n; i++) {
        if (!position(where, n_where, at(step, sw, i), &pos) || pos >= n_kept) return -1;
        int64_t k = kind[i], c = copy[i], g = in_graph[i] != 0;
        if (k < 0 || k >= n_kind || c < -1 || c + 1 >= n_copy) return -1;
        if (pos < 0) continue;
        by_class[pos * n_class + (k * 2 + g) * n_copy + c + 1] += 1;
        if (k == memcpy_kind && !g && c != unified) eager_bytes[pos] += (double)at(nbytes, bw, i);
        if (g) {
            int64_t id = at(corr, cw, i);
            if (!launches || launch_pos[launches - 1] != pos || launch_corr[launches - 1] != id) {
                launch_pos[launches] = pos;
                launch_corr[launches] = id;
                launches++;
            }
        }
    }
    return launches;
}

/* The kernels:P and kernel_us:P sums of metrics._class_counts for one pattern: kernels of
   kept steps whose short or full name code matches (name_ok, full_ok: a flag per code; code
   -1, no name, matches nothing), counted and their durations added (ns) per kept step. */
int64_t pattern_sums(int64_t n, const void *step, int sw, const int64_t *where, int64_t n_where,
                     const int8_t *kind, int64_t kernel_kind, const void *name, int nw,
                     const uint8_t *name_ok, int64_t n_name, const void *full, int fw,
                     const uint8_t *full_ok, int64_t n_full, const int64_t *start,
                     const int64_t *end, int64_t n_kept, int64_t *count, double *ns) {
    int64_t pos;
    for (int64_t i = 0; i < n; i++) {
        if (!position(where, n_where, at(step, sw, i), &pos) || pos >= n_kept) return -1;
        int64_t a = at(name, nw, i), b = at(full, fw, i);
        if (a < -1 || a >= n_name || b < -1 || b >= n_full) return -1;
        if (pos < 0 || kind[i] != kernel_kind) continue;
        if ((a >= 0 && name_ok[a]) || (b >= 0 && full_ok[b])) {
            count[pos] += 1;
            ns[pos] += (double)(end[i] - start[i]);
        }
    }
    return 0;
}

/* run.op_totals of the operations of kept steps (where[step] >= 0): per (name code, kind code)
   pair, pair = name * n_kind + kind, its operations counted and their durations summed in
   whole ns (end - start: exact, the same in any order of the rows), with first[pair] the
   first such row (-1 none: the groups' order of first occurrence). A code -1 (no name, no
   kind) groups nothing. Returns 0, or -1 for a value out of range. */
int64_t pair_totals(int64_t n, const void *step, int sw, const int64_t *where, int64_t n_where,
                    const void *name, int nw, int64_t n_name, const int8_t *kind, int64_t n_kind,
                    const int64_t *start, const int64_t *end, int64_t *count, int64_t *sum,
                    int64_t *first) {
    int64_t pos;
    for (int64_t i = 0; i < n; i++) {
        if (!position(where, n_where, at(step, sw, i), &pos)) return -1;
        int64_t a = at(name, nw, i), k = kind[i];
        if (a < -1 || a >= n_name || k < -1 || k >= n_kind) return -1;
        if (pos < 0 || a < 0 || k < 0) continue;
        int64_t g = a * n_kind + k;
        /* (whole ns, wrapping as numpy's int64 subtraction and sum do: exact in any order) */
        sum[g] = (int64_t)((uint64_t)sum[g] + ((uint64_t)end[i] - (uint64_t)start[i]));
        if (count[g]++ == 0) first[g] = i;
    }
    return 0;
}

/* gaps.anchor_extents: per anchor instance its first start, last end, and the first row in
   trace order that starts first (head; -1 for an instance without rows), with tied set where
   another row starts at the same time: then the caller picks among those by their calls.
   Called per chunk of rows, the state carried over (offset: the chunk's first row). */
int64_t anchor_heads(int64_t n, const void *anchor, int aw, int64_t n_inst, const int64_t *start,
                     const int64_t *end, int64_t *first, int64_t *last, int64_t *head,
                     uint8_t *tied, int64_t offset) {
    for (int64_t i = 0; i < n; i++) {
        int64_t g = at(anchor, aw, i);
        if (g < 0) continue;
        if (g >= n_inst) return -1;
        if (head[g] < 0) {
            first[g] = start[i];
            last[g] = end[i];
            head[g] = offset + i;
            continue;
        }
        if (end[i] > last[g]) last[g] = end[i];
        if (start[i] < first[g]) {
            first[g] = start[i];
            head[g] = offset + i;
            tied[g] = 0;
        } else if (start[i] == first[g]) {
            tied[g] = 1;
        }
    }
    return 0;
}

/* The i-th interval in start order (a, b) added to the union's prefix: far, the furthest end
   so far, and idle, the holes inside the union so far (coverage._prefix). */
static inline void extend(int64_t i, int64_t a, int64_t b, int64_t *far, int64_t *idle,
                          int64_t *s, int64_t *emax, int64_t *holes) {
    if (i == 0) {
        *far = b;
    } else {
        if (a > *far) *idle += a - *far;
        if (b > *far) *far = b;
    }
    s[i] = a;
    emax[i] = *far;
    holes[i] = *idle;
}

/* coverage.union_coverage's prefix of intervals taken in start order (`order`, NULL: as they
   are): their starts in that order, emax (the furthest end so far) and holes (the idle time
   inside the union so far), as coverage._prefix computes them. */
int64_t coverage_prefix(int64_t n, const int64_t *start, const int64_t *end, const void *order,
                        int ow, int64_t *s, int64_t *emax, int64_t *holes) {
    int64_t far = 0, idle = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t r = order ? at(order, ow, i) : i;
        if (r < 0 || r >= n) return -1;
        extend(i, start[r], end[r], &far, &idle, s, emax, holes);
    }
    return 0;
}

/* loader.Trace._launches through callrows.IdTables: the start (as a double) and thread of the
   CUDA API call of each operation (pid, correlation id), found in the tables of call rows
   indexed by id, one stretch per process (pids sorted); operations without one keep what
   start_out and tid_out hold (NaN, -1). A stride of 0 reads one value for every row (the
   one process of an export, the one thread of its calls). */
int64_t launch_lookup(int64_t n, const void *pid, int pw, int64_t pid_stride, const void *corr,
                      int cw, int64_t n_pids, const int64_t *pids, const int64_t *lows,
                      const int64_t *spans, const int64_t *bases, const void *table, int tw,
                      int64_t n_table, int64_t n_calls, const int64_t *a_start,
                      const int64_t *a_gtid, int64_t gtid_stride, double *start_out,
                      int32_t *tid_out) {
    for (int64_t i = 0; i < n; i++) {
        int64_t p = at(pid, pw, i * pid_stride), id = at(corr, cw, i);
        int64_t lo = 0, hi = n_pids - 1;  /* the first pid not below p (the last if none) */
        while (lo < hi) {
            int64_t mid = (lo + hi) / 2;
            if (pids[mid] < p) lo = mid + 1; else hi = mid;
        }
        if (pids[lo] != p || id <= 0) continue;
        int64_t offset = id - lows[lo];
        if (offset < 0 || offset >= spans[lo]) continue;
        int64_t where = bases[lo] + offset;
        if (where < 0 || where >= n_table) return -1;
        int64_t row = at(table, tw, where);
        if (row < 0) continue;
        if (row >= n_calls) return -1;
        start_out[i] = (double)a_start[row];
        tid_out[i] = (int32_t)(a_gtid[row * gtid_stride] & 0xFFFFFF);
    }
    return 0;
}

/* The first k in [0, n] with ids[k] >= x (numpy's searchsorted, side left; ids increasing),
   looked for from k = hint outwards in steps that double (a gallop), then by halving: the
   operations' ids mostly follow the calls' order, so each is found a step or two from the
   last one's, where a search from the middle of 40 M calls misses the cache at every halving. */
static int64_t lower_bound_from(const void *ids, int w, int64_t n, int64_t x, int64_t hint) {
    int64_t lo, hi, step = 1;  /* the answer lies in [lo, hi]; ids[lo - 1] < x <= ids[hi] */
    if (hint > n) hint = n;
    if (hint < 0) hint = 0;
    if (hint < n && at(ids, w, hint) < x) {  /* to the right of hint */
        lo = hint + 1;
        hi = hint + 1;
        while (hi < n && at(ids, w, hi) < x) {
            lo = hi + 1;
            hi += step;
            step <<= 1;
        }
        if (hi > n) hi = n;
    } else {  /* at or to the left of hint */
        hi = hint;
        lo = hint;
        while (lo > 0 && at(ids, w, lo - 1) >= x) {
            hi = lo - 1;
            lo = lo - step < 0 ? 0 : lo - step;
            step <<= 1;
        }
    }
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (at(ids, w, mid) < x) lo = mid + 1; else hi = mid;
    }
    return lo;
}

/* The interval (starts sorted, ends) holding x: the last one starting at or before x, where x
   is before its end; else -1. Searched from *hint (lower_bound_from), left where it ended. */
static inline int64_t interval_from(const int64_t *starts, const int64_t *ends, int64_t n,
                                    int64_t x, int64_t *hint) {
    int64_t k = lower_bound_from(starts, 8, n, x + 1, *hint);  /* k: starts <= x */
    *hint = k;
    return (k >= 1 && x < ends[k - 1]) ? k - 1 : -1;
}

/* loader.Trace._launches by callrows.SortedIds: the calls all of process a_pid, their
   correlation ids (ids, n_calls) increasing but sparse; each operation (pid, corr) of that
   process with corr > 0 takes the start (as float64) and thread of the call with its id, where
   there is one. */
int64_t sorted_lookup(int64_t n, const void *pid, int pw, int64_t pid_stride, const void *corr,
                      int cw, int64_t a_pid, const void *ids, int iw, int64_t n_calls,
                      const int64_t *a_start, const int64_t *a_gtid, int64_t gtid_stride,
                      double *start_out, int32_t *tid_out) {
    int64_t hint = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t id = at(corr, cw, i);
        if (id <= 0 || at(pid, pw, i * pid_stride) != a_pid) continue;
        int64_t row = lower_bound_from(ids, iw, n_calls, id, hint);
        hint = row;
        if (row >= n_calls || at(ids, iw, row) != id) continue;
        start_out[i] = (double)a_start[row];
        tid_out[i] = (int32_t)(a_gtid[row * gtid_stride] & 0xFFFFFF);
    }
    return 0;
}

/* steps.interval_index of each time t[i] (float64 ns, whole numbers, taken as int64 as numpy's
   astype does) among n_int intervals (starts sorted, ends): the last interval starting at or
   before t, where t is before its end; else -1. Each searched from the last one's place (the
   launch times of an eager export's operations mostly increase). -1 returned for a time that
   is NaN or out of the int64 range: the reference then runs. */
int64_t interval_lookup(int64_t n, const double *t, int64_t n_int, const int64_t *starts,
                        const int64_t *ends, void *out, int ow) {
    int64_t hint = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = t[i];
        if (!(v >= -9.2e18 && v <= 9.2e18)) return -1;  /* NaN or beyond int64 */
        int64_t found = interval_from(starts, ends, n_int, (int64_t)v, &hint);
        if (ow == 4) ((int32_t *)out)[i] = (int32_t)found; else ((int64_t *)out)[i] = found;
    }
    return 0;
}

/* coverage._covered_whole of float times q (n_q) from the whole prefix (s sorted, emax, holes:
   n intervals, first = s[0]): 0 before s[0], else the covered time before q as
   coverage._covered_at computes it in numpy, to the bit (its int64 search of floor(q), then
   (end - first) - holes[j] - max(end - q, 0) in int64 and float64 as numpy converts them).
   Each time is searched from the last one's place (the windows' and gaps' bounds mostly
   increase), where numpy's binary search from the middle misses the cache at every halving.
   -1 for a time beyond int64 (coverage._as_times_of then searches floats): the reference
   runs. */
int64_t covered_at(int64_t n, const int64_t *s, const int64_t *emax, const int64_t *holes,
                   int64_t n_q, const double *q, double *out) {
    int64_t hint = 0;
    double first_f = (double)s[0];
    for (int64_t i = 0; i < n_q; i++) {
        double v = q[i];
        if (!(v >= first_f)) {  /* before the first start, or NaN: nothing covered */
            out[i] = 0.0;
            continue;
        }
        if (!(v <= 9.2e18)) return -1;
        int64_t x = (int64_t)floor(v);
        int64_t j = lower_bound_from(s, 8, n, x + 1, hint);  /* starts <= x */
        hint = j;
        j -= 1;
        if (j < 0) j += n;  /* (numpy's index -1: the last row) */
        int64_t end = emax[j];
        double past = (double)end - v;
        out[i] = (double)((end - s[0]) - holes[j]) - (past > 0.0 ? past : 0.0);
    }
    return 0;
}

/* metrics._api_metrics over steps that do not overlap (starts sorted, each ending by the
   next's start): each call whose name id has a family (family[id], -1 none; ids past n_ids
   have none) and whose start lies in a step [start, end) counts once in counts[family *
   n_steps + step]. -1 for a name id below 0 (the reference then runs). */
int64_t api_counts(int64_t n, const int64_t *start, const void *name, int nw,
                   const int8_t *family, int64_t n_ids, int64_t n_steps, const int64_t *s_start,
                   const int64_t *s_end, int64_t *counts) {
    int64_t hint = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t id = at(name, nw, i);
        if (id < 0) return -1;
        if (id >= n_ids || family[id] < 0) continue;
        if (start[i] == INT64_MAX) return -1;
        int64_t k = interval_from(s_start, s_end, n_steps, start[i], &hint);
        if (k >= 0) counts[family[id] * n_steps + k]++;
    }
    return 0;
}

/* composition._nesting_depth: ranges in order (start, end), each's depth the number of
   ranges on a stack of ends when it starts, after the ends at or before its start are popped
   from the top (only the top: a range that overlaps without nesting stays below). stack: n
   entries of scratch. */
int64_t nesting_depth(int64_t n, const int64_t *start, const int64_t *end, int64_t *depth,
                      int64_t *stack) {
    int64_t top = 0;
    for (int64_t i = 0; i < n; i++) {
        while (top > 0 && stack[top - 1] <= start[i]) top--;
        depth[i] = top;
        stack[top++] = end[i];
    }
    return 0;
}

/* devices.by_device's place of each row: the place of its device among the devices (slot_of:
   span entries from device lo, -1 none), into slot (one byte a row: 256 devices at most). */
int64_t device_slots(int64_t n, const void *device, int dw, int64_t lo, const int32_t *slot_of,
                     int64_t span, uint8_t *slot) {
    for (int64_t i = 0; i < n; i++) {
        int64_t d = at(device, dw, i) - lo;
        if (d < 0 || d >= span || slot_of[d] < 0 || slot_of[d] > 255) return -1;
        slot[i] = (uint8_t)slot_of[d];
    }
    return 0;
}

#define SCATTER(T)                                                                         \
    for (int64_t i = 0; i < n; i++) ((T *)dst)[pos[slot[i]]++] = ((const T *)src)[i];

/* devices.by_device for one column: each row of src (w bytes) to its device's stretch of dst,
   the rows of a device in the order they had; pos: the next row of each place (its
   stretch's start, advanced here), slot: device_slots'. The stretches (counted from the same
   slots) hold the rows exactly: nothing is written outside dst. */
int64_t scatter_rows(int64_t n, const uint8_t *slot, int64_t *pos, const void *src, int w,
                     void *dst) {
    switch (w) {
    case 1: SCATTER(uint8_t) break;
    case 2: SCATTER(uint16_t) break;
    case 4: SCATTER(uint32_t) break;
    case 8: SCATTER(uint64_t) break;
    default: return -1;
    }
    return 0;
}

/* Where scatter_rows moves each of m rows (rows: increasing, int32 or int64 by rw): its
   place, from one pass over every row's slot (pos: each slot's stretch's start, advanced
   here). A column of a few rows (the bytes of copies and memsets) moved without a column of
   every row's. */
int64_t scatter_places(int64_t n, const uint8_t *slot, int64_t *pos, int64_t m, const void *rows,
                       int rw, int64_t *out) {
    int64_t j = 0, next = m ? at(rows, rw, 0) : -1;
    for (int64_t i = 0; i < n; i++) {
        if (i == next) {
            out[j++] = pos[slot[i]];
            next = j < m ? at(rows, rw, j) : -1;
            if (next >= 0 && next <= i) return -1;  /* (not increasing) */
        }
        pos[slot[i]]++;
    }
    return j == m ? 0 : -1;
}

/* coverage_prefix of intervals whose starts are k sorted runs (bounds: k + 1 row numbers),
   merged here in start order (a start equal in two runs: the earlier run's first, as a
   stable sort puts them) instead of sorted: the same s, emax and holes, without an order of
   the rows. */
int64_t coverage_merge(int64_t n, const int64_t *start, const int64_t *end, const int64_t *bounds,
                       int64_t k, int64_t *pos, int64_t *s, int64_t *emax, int64_t *holes) {
    int64_t far = 0, idle = 0;
    for (int64_t r = 0; r < k; r++) {
        if (bounds[r] < 0 || bounds[r] > bounds[r + 1] || bounds[r + 1] > n) return -1;
        pos[r] = bounds[r];
    }
    if (bounds[0] != 0 || bounds[k] != n) return -1;
    for (int64_t i = 0; i < n; i++) {
        int64_t best = -1;
        for (int64_t r = 0; r < k; r++)
            if (pos[r] < bounds[r + 1] && (best < 0 || start[pos[r]] < start[pos[best]])) best = r;
        if (best < 0) return -1;
        int64_t row = pos[best]++;
        extend(i, start[row], end[row], &far, &idle, s, emax, holes);
    }
    return 0;
}

/* opnames.unique_inverse where the codes span a narrow range (from lo, span values): which
   values are present (present: span bytes, zeroed by the caller). */
int64_t codes_present(int64_t n, const void *codes, int cw, int64_t lo, int64_t span,
                      uint8_t *present) {
    for (int64_t i = 0; i < n; i++) {
        int64_t v = at(codes, cw, i) - lo;
        if (v < 0 || v >= span) return -1;
        present[v] = 1;
    }
    return 0;
}

/* ... and each code's place among the present values (position: span entries), into inverse
   (ow bytes a row: the categorical's codes). */
int64_t codes_remap(int64_t n, const void *codes, int cw, int64_t lo, int64_t span,
                    const int64_t *position, void *inverse, int ow) {
    for (int64_t i = 0; i < n; i++) {
        int64_t v = at(codes, cw, i) - lo;
        if (v < 0 || v >= span) return -1;
        int64_t p = position[v];
        switch (ow) {
        case 1: ((int8_t *)inverse)[i] = (int8_t)p; break;
        case 2: ((int16_t *)inverse)[i] = (int16_t)p; break;
        case 4: ((int32_t *)inverse)[i] = (int32_t)p; break;
        default: ((int64_t *)inverse)[i] = p; break;
        }
    }
    return 0;
}
