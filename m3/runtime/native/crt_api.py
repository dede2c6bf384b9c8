r"""The exported C API of every generated module (``rt_*``) and its ``cffi`` declaration.

Why apart from :mod:`.crt` (the maps, indexes and journals): this is the
boundary the Python side (:mod:`.backend`) calls, the same for every
program, so :data:`CDEF` (what ``cffi`` is told) and :data:`API` (what C
defines) are kept side by side and change together.  A runtime is created
with its maps by the generated ``rt_setup`` (:mod:`.cgen`); batches run
through ``rt_trigger`` and end in ``rt_commit`` or ``rt_rollback``; the
mirror reads ``rt_pending`` and ``rt_last``; state moves with ``rt_dump``
and ``rt_load``.

>>> import re
>>> sorted(set(re.findall(r"\b(rt_[a-z_]+)\(", CDEF)) - set(re.findall(r"\n[a-z_0-9 *]+?\b(rt_[a-z_]+)\(", API)))
[]
"""

CDEF = """
typedef struct rt rt_t;
rt_t *rt_new(double eps);
void rt_free(rt_t *rt);
int rt_trigger(rt_t *rt, int t, int64_t n, void **cols);
void rt_commit(rt_t *rt);
void rt_rollback(rt_t *rt);
void rt_clear(rt_t *rt);
int64_t rt_count(rt_t *rt, int m);
int64_t rt_dump(rt_t *rt, int m, int64_t *keys, int64_t *vals);
int rt_load(rt_t *rt, int m, int64_t n, const int64_t *keys, const int64_t *vals);
int64_t rt_pending(rt_t *rt, int m, int64_t *out);
void rt_pending_clear(rt_t *rt);
void rt_pending_drop(rt_t *rt, int m);
void rt_pending_reload(rt_t *rt, int m);
void rt_get_many(rt_t *rt, int m, int64_t n, const int64_t *keys, int64_t *vals);
int64_t rt_last(rt_t *rt, int m, int64_t *out);
int64_t rt_changes_cap(rt_t *rt, int nm, const int *ms);
int64_t rt_changes(rt_t *rt, int nm, const int *ms, int64_t cap, int64_t *keys, int64_t *olds, int64_t *news);
int64_t rt_changelog(rt_t *rt, int nm, const int *ms, int64_t cap, int64_t *keys, int64_t *vals, int64_t *weights,
                     int64_t *leaving);
int64_t rt_last_distinct(rt_t *rt, int m, int64_t cap, int64_t *keys, int64_t *olds, int64_t *news);
void rt_fail_after(rt_t *rt, int64_t n);
int64_t rt_entries(rt_t *rt);
int rt_intern(rt_t *rt, int64_t id, const char *p, int64_t n);
int rt_overflow_map(rt_t *rt);
int64_t rt_export(rt_t *rt, int m, int col, int kind, const int32_t *target_of, const int16_t *str_slots,
                  int64_t nstr, int64_t cap, int64_t *keys, int64_t *vals, int32_t *targets);
int64_t rt_import(rt_t *rt, int m, int64_t n, const int *kinds, const void **cols, const int64_t **dicts, int vkind,
                  const void *vals, int col, int skind, const int8_t *skip, const int16_t *str_slots, int64_t nstr,
                  int install, int64_t *keys_out, int64_t *vals_out);
"""

API = r"""
static void rt_setup(rt_t *rt, double eps);  /* generated: the maps and their indexes */
static int run_trigger(rt_t *rt, int t, int64_t n, void **cols);  /* generated */

rt_t *rt_new(double eps) {
    rt_t *rt = calloc(1, sizeof(rt_t));
    if (rt) rt_setup(rt, eps);
    return rt;
}

void rt_free(rt_t *rt) {
    if (!rt) return;
    for (int i = 0; i < rt->nmaps; i++) map_release(&rt->maps[i]);
    for (int64_t i = 0; i < rt->nstrs; i++) free(rt->strs[i].p);
    free(rt->strs); sidx_free(rt->sidx); free(rt);
}

/* the intern table's string ``id`` (UTF-8), for ordering comparisons between strings */
int rt_intern(rt_t *rt, int64_t id, const char *p, int64_t n) {
    if (id >= rt->nstrs) {
        int64_t cap = rt->nstrs ? rt->nstrs : 64;
        while (cap <= id) cap *= 2;
        str_t *s = realloc(rt->strs, sizeof(str_t) * cap); if (!s) return -1;
        memset(s + rt->nstrs, 0, sizeof(str_t) * (cap - rt->nstrs));
        rt->strs = s; rt->nstrs = cap;
    }
    char *c = malloc(n ? n : 1); if (!c) return -1;
    memcpy(c, p, n); free(rt->strs[id].p);
    rt->strs[id].p = c; rt->strs[id].n = n;
    return 0;
}

int rt_trigger(rt_t *rt, int t, int64_t n, void **cols) { return run_trigger(rt, t, n, cols); }

void rt_rollback(rt_t *rt) {
    for (int i = 0; i < rt->nmaps; i++) {
        map_t *m = &rt->maps[i];
        int64_t rec = m->arity + 1;
        for (int64_t p = m->jwn - rec; p >= 0; p -= rec) { val_t v; v.i = m->jw[p + m->arity]; map_setv(m, m->jw + p, v); }
        m->jwn = 0;
    }
    rt->failed = 0;
}

void rt_commit(rt_t *rt) {
    for (int i = 0; i < rt->nmaps; i++) {
        map_t *m = &rt->maps[i];
        int64_t rec = m->arity + 1, nk = m->jwn / rec;
        if (!m->overflow) {
            if (m->pendn + nk * m->arity > 4 * (m->n + 16384) * (m->arity ? m->arity : 1)) { m->overflow = 1; m->pendn = 0; }
            else {
                if (m->pendn + nk * m->arity + 1 > m->pendcap) {
                    int64_t cap = m->pendcap ? m->pendcap * 2 : 4096;
                    while (cap < m->pendn + nk * m->arity + 1) cap *= 2;
                    int64_t *p = realloc(m->pend, sizeof(int64_t) * cap);
                    if (!p) { m->overflow = 1; m->pendn = 0; goto swap; }
                    m->pend = p; m->pendcap = cap;
                }
                for (int64_t r = 0; r < nk; r++) { memcpy(m->pend + m->pendn, m->jw + r * rec, sizeof(int64_t) * m->arity); m->pendn += m->arity; }
                if (!m->arity && nk) { m->pend[0] = 1; m->pendn = 1; }  /* arity 0: one flag, "written" */
            }
        }
    swap:;
        int64_t *j = m->jl; int64_t jc = m->jlcap;
        m->jl = m->jw; m->jlcap = m->jwcap; m->jln = m->jwn;
        m->jw = j; m->jwcap = jc; m->jwn = 0;
    }
}

void rt_clear(rt_t *rt) { for (int i = 0; i < rt->nmaps; i++) map_empty(&rt->maps[i]); }
int64_t rt_count(rt_t *rt, int m) { return rt->maps[m].n; }
int64_t rt_entries(rt_t *rt) { int64_t n = 0; for (int i = 0; i < rt->nmaps; i++) n += rt->maps[i].n; return n; }

int64_t rt_dump(rt_t *rt, int mi, int64_t *keys, int64_t *vals) {
    map_t *m = &rt->maps[mi]; int64_t j = 0;
    for (int64_t e = 0; e < m->ptop; e++) {
        if (!m->live[e]) continue;
        memcpy(keys + j * m->arity, ENT(m, e), sizeof(int64_t) * m->arity);
        vals[j++] = VAL(m, e).i;
    }
    return j;
}

int rt_load(rt_t *rt, int mi, int64_t n, const int64_t *keys, const int64_t *vals) {
    map_t *m = &rt->maps[mi];
    for (int64_t j = 0; j < n; j++) { val_t v; v.i = vals[j]; if (map_setv(m, keys + j * m->arity, v)) return -1; }
    return 0;
}

/* keys written since the last rt_pending_clear (arity int64 each, repeats possible); -1: reload the whole map */
int64_t rt_pending(rt_t *rt, int mi, int64_t *out) {
    map_t *m = &rt->maps[mi];
    if (m->overflow) return -1;
    if (out) memcpy(out, m->pend, sizeof(int64_t) * m->pendn);
    return m->pendn;
}

void rt_pending_clear(rt_t *rt) { for (int i = 0; i < rt->nmaps; i++) { rt->maps[i].pendn = 0; rt->maps[i].overflow = 0; } }
/* one map's rt_pending_clear: its mirror caught up by other means (the last batch's changes) */
void rt_pending_drop(rt_t *rt, int mi) { rt->maps[mi].pendn = 0; rt->maps[mi].overflow = 0; }
/* map mi changed without a journal (entries taken out by their codes): its mirror reloads it whole when next read */
void rt_pending_reload(rt_t *rt, int mi) { rt->maps[mi].pendn = 0; rt->maps[mi].overflow = 1; }

void rt_get_many(rt_t *rt, int mi, int64_t n, const int64_t *keys, int64_t *vals) {
    map_t *m = &rt->maps[mi];
    for (int64_t j = 0; j < n; j++) { int32_t e = map_find(m, keys + j * m->arity); vals[j] = e < 0 ? 0 : VAL(m, e).i; }
}

int64_t rt_last(rt_t *rt, int mi, int64_t *out) {
    map_t *m = &rt->maps[mi];
    if (out) memcpy(out, m->jl, sizeof(int64_t) * m->jln);
    return m->jln;
}

/* rows rt_changes may write for maps ms (the records of their last journals) */
int64_t rt_changes_cap(rt_t *rt, int nm, const int *ms) {
    int64_t cap = 0;
    for (int j = 0; j < nm; j++) { map_t *m = &rt->maps[ms[j]]; cap += m->jln / (m->arity + 1); }
    return cap;
}

static inline uint64_t chg_hash(const int64_t *k, int a) {
    uint64_t h = 0x9E3779B97F4A7C15ULL;
    for (int i = 0; i < a; i++) { h ^= (uint64_t)k[i] + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2); h ^= h >> 31; h *= 0xBF58476D1CE4E5B9ULL; h ^= h >> 29; }
    return h ^ (h >> 32);
}

/* The keys the last batch changed in maps ms[0..nm) (one arity, the same key columns: a view's maps), each once,
   with every map's value before the batch (its first journal record's old value there, else its value now) and
   its value now; a key none of whose values changed is left out.  Column-major with stride cap (at least
   rt_changes_cap): key column i at keys + i*cap, map j's values at olds/news + j*cap, as value bits (doubles
   compared as doubles).  Returns the rows written, or -1: out of memory. */
int64_t rt_changes(rt_t *rt, int nm, const int *ms, int64_t cap, int64_t *keys, int64_t *olds, int64_t *news) {
    if (nm <= 0) return 0;
    int a = rt->maps[ms[0]].arity;
    int64_t tcap = 16;
    while (tcap < cap * 2) tcap <<= 1;
    int64_t *slots = malloc(sizeof(int64_t) * tcap);
    uint8_t *seen = calloc(cap * nm + 1, 1);
    int64_t *row = malloc(sizeof(int64_t) * (a ? a : 1));
    if (!slots || !seen || !row) { free(slots); free(seen); free(row); return -1; }
    for (int64_t s = 0; s < tcap; s++) slots[s] = -1;
    int64_t n = 0;
    for (int j = 0; j < nm; j++) {
        map_t *m = &rt->maps[ms[j]];
        int64_t rec = m->arity + 1;
        for (int64_t p = 0; p + rec <= m->jln; p += rec) {
            const int64_t *k = m->jl + p;
            int64_t s = chg_hash(k, a) & (tcap - 1), r;
            for (;;) {
                r = slots[s];
                if (r < 0) break;
                int same = 1;
                for (int i = 0; i < a; i++) if (keys[i * cap + r] != k[i]) { same = 0; break; }
                if (same) break;
                s = (s + 1) & (tcap - 1);
            }
            if (r < 0) { r = slots[s] = n++; for (int i = 0; i < a; i++) keys[i * cap + r] = k[i]; }
            if (!seen[j * cap + r]) { seen[j * cap + r] = 1; olds[j * cap + r] = k[a]; }
        }
    }
    int64_t out = 0;
    for (int64_t r = 0; r < n; r++) {
        for (int i = 0; i < a; i++) row[i] = keys[i * cap + r];
        int changed = 0;
        for (int j = 0; j < nm; j++) {
            map_t *m = &rt->maps[ms[j]];
            int32_t e = map_find(m, row);
            val_t now; now.i = e < 0 ? 0 : VAL(m, e).i;
            val_t old; old.i = seen[j * cap + r] ? olds[j * cap + r] : now.i;
            if (m->isfloat ? old.d != now.d : old.i != now.i) changed = 1;
            olds[j * cap + out] = old.i; news[j * cap + out] = now.i;
        }
        if (changed) { for (int i = 0; i < a; i++) keys[i * cap + out] = row[i]; out++; }
    }
    free(slots); free(seen); free(row);
    return out;
}

/* The keys the last batch wrote in map mi, each once, in the order first written (row-major: arity codes a row,
   at keys + r*arity), with its value before the batch (its first journal record's old value) and its value now,
   as value bits; a key written back to its old value is kept (a TRACK map's entries are written so that their
   rows are named).  What the mirror reads per kept map and batch: deduplicated by one hash pass here, not by
   sorting the journal's keys.  cap: at least the journal's records (rt_last / (arity + 1)).  Returns the rows
   written, or -1: out of memory. */
int64_t rt_last_distinct(rt_t *rt, int mi, int64_t cap, int64_t *keys, int64_t *olds, int64_t *news) {
    map_t *m = &rt->maps[mi];
    int a = m->arity;
    int64_t rec = a + 1, tcap = 16, n = 0;
    if (!m->jln || cap <= 0) return 0;
    while (tcap < cap * 2) tcap <<= 1;
    int64_t *slots = malloc(sizeof(int64_t) * tcap);
    if (!slots) return -1;
    for (int64_t s = 0; s < tcap; s++) slots[s] = -1;
    for (int64_t p = 0; p + rec <= m->jln && n < cap; p += rec) {
        const int64_t *k = m->jl + p;
        int64_t s = chg_hash(k, a) & (tcap - 1), r;
        for (;;) {
            r = slots[s];
            if (r < 0 || !memcmp(keys + r * a, k, sizeof(int64_t) * a)) break;
            s = (s + 1) & (tcap - 1);
        }
        if (r < 0) { r = slots[s] = n++; memcpy(keys + r * a, k, sizeof(int64_t) * a); olds[r] = k[a]; }
    }
    for (int64_t r = 0; r < n; r++) { int32_t e = map_find(m, keys + r * a); news[r] = e < 0 ? 0 : VAL(m, e).i; }
    free(slots);
    return n;
}

/* rt_changes laid out as a changelog of a view whose values are its maps' values (no quotient): for every
   changed key with a value other than 0 before the batch, its key and those values with weight -1 (the rows
   that leave, first), then for every one with a value other than 0 now, its key and values with weight +1.
   Column-major and packed: with n the rows written, key column i at keys + i*n, map j's values at vals + j*n,
   n weights; so the buffers need room for 2*cap rows (cap at least rt_changes_cap) but only the rows written
   are touched, and a reader copies out exactly what the view changed.  Returns n (*leaving of them leave), or
   -1: out of memory. */
static inline int nonzero(const map_t *m, int64_t bits) { val_t v; v.i = bits; return m->isfloat ? v.d != 0.0 : v.i != 0; }

int64_t rt_changelog(rt_t *rt, int nm, const int *ms, int64_t cap, int64_t *keys, int64_t *vals, int64_t *weights,
                     int64_t *leaving) {
    *leaving = 0;
    if (nm <= 0 || cap <= 0) return 0;
    int a = rt->maps[ms[0]].arity;
    int64_t *k = malloc(sizeof(int64_t) * cap * (a ? a : 1)), *o = malloc(sizeof(int64_t) * cap * nm),
            *w = malloc(sizeof(int64_t) * cap * nm);
    if (!k || !o || !w) { free(k); free(o); free(w); return -1; }
    int64_t n = rt_changes(rt, nm, ms, cap, k, o, w), out = 0, stride = 0;
    if (n < 0) { free(k); free(o); free(w); return -1; }
    for (int side = 0; side < 2; side++) {  /* count first: the stride is the rows written */
        const int64_t *v = side ? w : o;
        for (int64_t r = 0; r < n; r++) {
            int in = 0;
            for (int j = 0; j < nm && !in; j++) in = nonzero(&rt->maps[ms[j]], v[j * cap + r]);
            stride += in;
        }
    }
    for (int side = 0; side < 2; side++) {  /* 0: the old rows (-1), 1: the new rows (+1) */
        const int64_t *v = side ? w : o;
        for (int64_t r = 0; r < n; r++) {
            int in = 0;
            for (int j = 0; j < nm && !in; j++) in = nonzero(&rt->maps[ms[j]], v[j * cap + r]);
            if (!in) continue;
            for (int i = 0; i < a; i++) keys[i * stride + out] = k[i * cap + r];
            for (int j = 0; j < nm; j++) vals[j * stride + out] = v[j * cap + r];
            weights[out++] = side ? 1 : -1;
        }
        if (!side) *leaving = out;
    }
    free(k); free(o); free(w);
    return out;
}

/* The slot (docs/cumulus.md §3.1, m3/cumulus/hashing.py) of a key code of kind 0 INT or DATE (a DATE's code is its
   day number, hashed as that INT), 1 FLOAT (its bits: an integral value as the INT of that value, a NaN as the
   quiet NaN), 2 STRING (its intern id's slot, str_slots[id], worked out once per string by the Python side). */
static inline int64_t slot_of_code(int64_t c, int kind, const int16_t *str_slots, int64_t nstr) {
    if (kind == 2) return c >= 0 && c < nstr ? str_slots[c] : -1;
    if (kind == 1) {
        val_t v; v.i = c;
        if (v.d != v.d) c = INT64_C(0x7FF8000000000000);
        else if (v.d >= -9223372036854775808.0 && v.d < 9223372036854775808.0 && (double)(int64_t)v.d == v.d) c = (int64_t)v.d;
    }
    return (int64_t)(((uint64_t)c * UINT64_C(0x9E3779B97F4A7C15)) >> 52);
}

/* Map mi's entries whose key column col falls in a slot that target_of[slot] (4096 of them) sends somewhere
   (>= 0), as column buffers: key column i at keys + i*cap, value bits at vals, the target of each at targets
   (col < 0: every entry, target_of[0] its target; target_of NULL: every entry, target 0).  What a Chunk carries
   (node/cumulus/entry_columns.py) made with no per-entry Python: cap is at least the map's count.  Returns the
   entries written, or -1: a STRING code without a slot (str_slots too short). */
int64_t rt_export(rt_t *rt, int mi, int col, int kind, const int32_t *target_of, const int16_t *str_slots,
                  int64_t nstr, int64_t cap, int64_t *keys, int64_t *vals, int32_t *targets) {
    map_t *m = &rt->maps[mi]; int64_t j = 0; int a = m->arity;
    for (int64_t e = 0; e < m->ptop; e++) {
        if (!m->live[e]) continue;
        const int64_t *k = ENT(m, e);
        int32_t t = 0;
        if (target_of && col >= 0) {
            int64_t s = slot_of_code(k[col], kind, str_slots, nstr);
            if (s < 0) return -1;
            t = target_of[s];
            if (t < 0) continue;
        } else if (target_of && (t = target_of[0]) < 0) return 0;  /* nothing goes anywhere */
        if (j >= cap) return -1;
        for (int i = 0; i < a; i++) keys[(int64_t)i * cap + j] = k[i];
        vals[j] = VAL(m, e).i; targets[j] = t; j++;
    }
    return j;
}

/* The twin of rt_export: n entries of map mi given as column buffers (what a Cumulus Push or Chunk carries,
   node/cumulus/entry_install.py) made codes and, if install, set in the map (no journal, as rt_load: a value 0
   removes).  Key column i is read from cols[i] by kinds[i]: 0 int64 codes as they are (INT, a DATE's day number),
   1 int32 days since 1970 (Arrow date32: the day number less 719163), 2 double (a FLOAT key: f2k), 3 int64 into a
   FLOAT key (f2k of the double), 4 int32 indices into dicts[i] (a dictionary-encoded STRING column: its strings'
   intern ids).  The values: vkind 0 their 8 bytes as they are (int64, or a FLOAT map's doubles), 1 int64 made
   double (ints into a FLOAT map).  An entry whose key column col (col >= 0, kind skind as rt_export's) falls in a
   slot with skip[slot] set is left out (a Push's entries of our own).  The entries kept are written row-major to
   keys_out (arity codes each) and their value bits to vals_out; returns how many, or -1 (out of memory). */
int64_t rt_import(rt_t *rt, int mi, int64_t n, const int *kinds, const void **cols, const int64_t **dicts, int vkind,
                  const void *vals, int col, int skind, const int8_t *skip, const int16_t *str_slots, int64_t nstr,
                  int install, int64_t *keys_out, int64_t *vals_out) {
    map_t *m = &rt->maps[mi]; int a = m->arity; int64_t j = 0;
    for (int64_t r = 0; r < n; r++) {
        int64_t *k = keys_out + j * a;
        for (int i = 0; i < a; i++) {
            switch (kinds[i]) {
            case 1: k[i] = (int64_t)((const int32_t *)cols[i])[r] + 719163; break;
            case 2: k[i] = f2k(((const double *)cols[i])[r]); break;
            case 3: k[i] = f2k((double)((const int64_t *)cols[i])[r]); break;
            case 4: k[i] = dicts[i][((const int32_t *)cols[i])[r]]; break;
            default: k[i] = ((const int64_t *)cols[i])[r];
            }
        }
        if (skip && col >= 0) {
            int64_t s = slot_of_code(k[col], skind, str_slots, nstr);
            if (s >= 0 && skip[s]) continue;
        }
        val_t v;
        if (vkind == 1) v.d = (double)((const int64_t *)vals)[r]; else v.i = ((const int64_t *)vals)[r];
        if (install && map_setv(m, k, v)) return -1;
        vals_out[j++] = v.i;
    }
    return j;
}

void rt_fail_after(rt_t *rt, int64_t n) { rt->fail_after = n; }
int rt_overflow_map(rt_t *rt) { return rt->ovf_map; }
"""
