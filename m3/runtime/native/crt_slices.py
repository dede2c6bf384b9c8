r"""``rt_slice_changes``: the changes of a counted map's slices' counts in the last batch, found in C.

Why: a map kept as counts alone (:mod:`..slicecounts`, a ``COUNT(DISTINCT x)``'s
multiplicity map) changes a slice's count only where an entry went from 0
to non-zero or back.  :func:`.slicechanges.slice_changes` found those
slices with numpy -- the batch's distinct keys copied out, masked, grouped
by sorting their bound codes (``numpy.unique`` over void rows) -- per map
and batch: Nexmark q16's eight ``(channel, day, bidder|auction)`` maps
spent about 2 µs per event there, most of it the sorts.  Here one hash pass
over the batch's distinct keys groups the transitions by their bound
codes and sums them, as the numpy reading does (the same slices, the same
representative key, the same order: by the first written key that moved
in each), and only the slices whose count changed leave C.  The numpy
reading stays as the reference (``tests/m3/test_native_slices.py``); its
fallback past ``SLICE_MAX_ARITY`` key columns is a guard only (the native
backend refuses a map of more keys: ``cgen.MAX_KEYS``).

>>> "rt_slice_changes(" in SLICES and "rt_slice_changes(" in SLICES_CDEF
True
"""

SLICE_MAX_ARITY = 16

SLICES_CDEF = """
int64_t rt_slice_changes(rt_t *rt, int m, int at, int64_t cap, int64_t *keys, int64_t *deltas);
"""

SLICES = r"""
/* Map mi's slices (bound at every key position but at) whose count of non-zero entries the last batch changed:
   for each, the first key the batch wrote in it that went from 0 to non-zero or back (row-major, arity codes at
   keys + r*arity) and the change of its count (deltas[r]), in the order those keys were first written; a slice
   whose entries came and went in equal numbers is left out.  The map's values are INT.  cap: at least the
   journal's records (rt_last / (arity + 1)).  Returns the slices written, -1: out of memory, -2: more than 16
   key columns (the caller reads the distinct keys instead). */
int64_t rt_slice_changes(rt_t *rt, int mi, int at, int64_t cap, int64_t *keys, int64_t *deltas) {
    map_t *m = &rt->maps[mi];
    int a = m->arity;
    if (a > 16 || at < 0 || at >= a) return -2;
    if (!m->jln || cap <= 0) return 0;
    int64_t *dk = malloc(sizeof(int64_t) * cap * a), *olds = malloc(sizeof(int64_t) * cap),
            *news = malloc(sizeof(int64_t) * cap), *slots = NULL;
    int64_t n = (dk && olds && news) ? rt_last_distinct(rt, mi, cap, dk, olds, news) : -1, tcap = 16, ns = 0;
    if (n > 0) {
        while (tcap < n * 2) tcap <<= 1;
        slots = malloc(sizeof(int64_t) * tcap);
        if (!slots) n = -1;
    }
    if (n <= 0) { free(dk); free(olds); free(news); return n; }
    for (int64_t s = 0; s < tcap; s++) slots[s] = -1;
    int64_t b[16];
    for (int64_t r = 0; r < n; r++) {
        if ((olds[r] == 0) == (news[r] == 0)) continue;  /* still in its slice, or still out */
        const int64_t *k = dk + r * a;
        int nb = 0;
        for (int i = 0; i < a; i++) if (i != at) b[nb++] = k[i];
        int64_t h = chg_hash(b, nb) & (tcap - 1), s;
        for (;;) {
            s = slots[h];
            if (s < 0) break;
            const int64_t *rep = keys + s * a;
            int same = 1;
            for (int i = 0, j = 0; i < a; i++) if (i != at && rep[i] != b[j++]) { same = 0; break; }
            if (same) break;
            h = (h + 1) & (tcap - 1);
        }
        if (s < 0) { s = slots[h] = ns++; memcpy(keys + s * a, k, sizeof(int64_t) * a); deltas[s] = 0; }
        deltas[s] += olds[r] == 0 ? 1 : -1;
    }
    int64_t out = 0;
    for (int64_t s = 0; s < ns; s++) {
        if (!deltas[s]) continue;
        if (out != s) { memmove(keys + out * a, keys + s * a, sizeof(int64_t) * a); deltas[out] = deltas[s]; }
        out++;
    }
    free(dk); free(olds); free(news); free(slots);
    return out;
}
"""
