"""The fixed part of every generated C module: hash maps, secondary indexes, journals, the exported API.

Why a fixed part: the per-program code (:mod:`.cgen`) only emits trigger
loops and the maps' shapes; everything that is the same for every program
lives here once, so a generated module is small and the API the Python side
calls (:data:`.crt_api.CDEF`) is identical for all programs (one ``cffi``
declaration).  :data:`SOURCE` is this module's types and maps with the value
helpers of :mod:`.crt_values` between them (they read the types, the maps'
code does not read them), the update queue of :mod:`.crt_queue` (it calls the
maps' updates) and the exported API of :mod:`.crt_api` after them.

Layout of a map: an entry *pool* of records addressed by int32 entry ids,
freed ids reused: a record is the key (``arity`` int64 — INT, DATE as a day
number, STRING as an interned id, FLOAT as its bits) and right after it the
value (a ``val_t``), so finding a key and reading or updating its value
touch one place in memory, not two arrays (``ENT`` / ``VAL``); the key's
hash and a live flag are kept per entry beside the pool;
a *primary* open-addressing table (linear probing, tombstones) of
``(hash, id)`` slots; and per secondary index a table from the bound
positions' values to the *head* entry of a doubly linked list of the entries
sharing them (``next``/``prev`` per entry).  An index slot compares its key
by reading the head entry's key, so indexes store no keys of their own.

INT overflow: the Python backend's ints do not overflow, so C must not
wrap silently.  Every INT addition and multiplication the triggers do goes
through ``__builtin_add_overflow`` / ``__builtin_mul_overflow`` (gcc and
clang): the value update in :c:func:`map_add_i`, and the products and fused
sums the generated code computes (``CK_MUL`` / ``CK_ADD``, GNU statement
expressions that leave the trigger).  On overflow the trigger returns
``RT_OVERFLOW`` (-3, distinct from -1: out of memory or an injected failure)
before the update is made, :c:func:`rt_overflow_map` names the map whose
statement overflowed, and the caller rolls the batch back as after any
failure; the runtime then continues on the Python backend.

Journals: every update appends ``(key, old value)`` to the map's working
journal; :c:func:`rt_rollback` undoes it newest first, :c:func:`rt_commit`
keeps it as the *last batch's* journal (the view changes, read lazily) and
adds its keys to the *pending* list that the Python mirror reads when it
syncs (capped: past the cap the map is marked for a full reload instead).
"""

from .crt_api import API
from .crt_queue import QUEUE
from .crt_slices import SLICES
from .crt_strings import STRINGS
from .crt_values import VALUES

_TYPES = r"""
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* a trigger's result: 0 done, -1 out of memory or an injected failure, -2 no such trigger,
   RT_OVERFLOW an INT sum or product beyond 64 bits (rt->ovf_map: the map whose statement it was) */
#define RT_OVERFLOW (-3)
/* checked INT arithmetic inside a trigger (which has ``rt``): on overflow, leave the trigger */
#define CK_ADD(a, b, m) ({ int64_t ck_; if (__builtin_expect(__builtin_add_overflow((int64_t)(a), (int64_t)(b), &ck_), 0)) \
    { rt->ovf_map = (m); return RT_OVERFLOW; } ck_; })
#define CK_MUL(a, b, m) ({ int64_t ck_; if (__builtin_expect(__builtin_mul_overflow((int64_t)(a), (int64_t)(b), &ck_), 0)) \
    { rt->ovf_map = (m); return RT_OVERFLOW; } ck_; })

typedef union { int64_t i; double d; } val_t;
typedef struct { uint32_t h; int32_t id; } slot_t;          /* id -1: empty, -2: removed */
typedef struct {
    int npos; int pos[16];
    int ident;                                             /* one integer column: hash keeps neighbours near */
    int64_t cap, used, tomb;                               /* cap: a power of two */
    slot_t *slots;
    int32_t *next, *prev;                                  /* per entry (secondary indexes only) */
} index_t;
typedef struct {
    int arity, stride, isfloat; double eps;
    int64_t n, pcap, ptop, nfree;
    int64_t *ents;                                         /* records of stride int64: arity keys, the value */
    uint8_t *live; uint32_t *hash; int32_t *freelist;
    index_t prim; int nidx; index_t idx[8];
    int64_t *jw, jwn, jwcap;                               /* working journal: arity keys + old value */
    int64_t *jl, jln, jlcap;                               /* the last committed batch's journal */
    int64_t *pend, pendn, pendcap; int overflow;           /* keys written since the mirror's last sync */
} map_t;
typedef struct { char *p; int64_t n; } str_t;
struct rt { int nmaps; int ovf_map; int64_t fail_after; int failed; str_t *strs; int64_t nstrs; void *sidx; map_t maps[NMAPS]; };
typedef struct rt rt_t;
/* entry e's record (its key columns), and its value right after them */
#define ENT(m, e) ((m)->ents + (int64_t)(e) * (m)->stride)
#define VAL(m, e) (((val_t *)ENT(m, e))[(m)->arity])
"""

_MAPS = r"""
static inline uint32_t hkey(const int64_t *k, const index_t *t) {
    if (t->ident) { uint64_t x = (uint64_t)k[t->pos[0]]; return (uint32_t)((x ^ (x >> 32)) * 3u); }
    uint64_t h = 0x9E3779B97F4A7C15ULL;
    for (int i = 0; i < t->npos; i++) {
        h ^= (uint64_t)k[t->pos[i]] + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
        h ^= h >> 31; h *= 0xBF58476D1CE4E5B9ULL; h ^= h >> 29;
    }
    return (uint32_t)(h ^ (h >> 32));
}

/* a key of a few columns copied inline: memcpy of a size known only at run time is a call into libc */
static inline void kcopy(int64_t *d, const int64_t *s, int n) { for (int i = 0; i < n; i++) d[i] = s[i]; }

static inline int same_key(const map_t *m, int32_t e, const int64_t *k, const index_t *t) {
    const int64_t *ek = ENT(m, e);
    for (int i = 0; i < t->npos; i++) if (ek[t->pos[i]] != k[t->pos[i]]) return 0;
    return 1;
}

/* the slot holding key k (positions of t), or -1 */
static inline int64_t tab_find(const map_t *m, const index_t *t, const int64_t *k, uint32_t h) {
    if (!t->cap) return -1;
    int64_t mask = t->cap - 1, s = h & mask;
    for (;;) {
        slot_t sl = t->slots[s];
        if (sl.id == -1) return -1;
        if (sl.id >= 0 && sl.h == h && same_key(m, sl.id, k, t)) return s;
        s = (s + 1) & mask;
    }
}

/* gcc's dead-code pass drops __builtin_prefetch here (its address is all the call's result): on x86 the
   instruction is asked for as volatile asm, which no pass removes */
#if defined(__x86_64__) || defined(__i386__)
#define PF(p) __asm__ volatile("prefetcht0 %0" : : "m"(*(const char *)(p)))
#else
#define PF(p) __builtin_prefetch(p)
#endif
/* hints for a row a few ahead (the trigger loops call them, see ctrigger): the slot key k hashes to, then the
   entry that slot names (its key and value), so the row's own lookup finds them in cache.  Only reads. */
static inline void pf_slot_h(const index_t *t, uint32_t h) { if (t->cap) PF(&t->slots[h & (t->cap - 1)]); }
static inline void pf_slot(const index_t *t, const int64_t *k) { if (t->cap) pf_slot_h(t, hkey(k, t)); }

/* the entry whose hash is k's within a short probe of its first slot (or -1): a hint's guess, keys not compared */
static inline int32_t pf_peek_h(const index_t *t, uint32_t h) {
    if (!t->cap) return -1;
    int64_t mask = t->cap - 1, s = h & mask;
    for (int i = 0; i < 4; i++, s = (s + 1) & mask) {
        slot_t sl = t->slots[s];
        if (sl.id == -1) return -1;
        if (sl.id >= 0 && sl.h == h) return sl.id;
    }
    return -1;
}

static inline void pf_entry_h(const map_t *m, const index_t *t, uint32_t h) {
    int32_t id = pf_peek_h(t, h);
    if (id >= 0) { const int64_t *r = ENT(m, id); PF(r); PF(r + m->arity); }  /* a record may span two lines */
}
static inline void pf_entry(const map_t *m, const index_t *t, const int64_t *k) {
    if (t->cap) pf_entry_h(m, t, hkey(k, t));
}

static int tab_grow(index_t *t) {
    int64_t live = t->used - t->tomb;
    int64_t cap = 16;
    while (cap < (live + 1) * 4) cap <<= 1;
    slot_t *ns = malloc(sizeof(slot_t) * cap);
    if (!ns) return -1;
    for (int64_t i = 0; i < cap; i++) ns[i].id = -1;
    for (int64_t i = 0; i < t->cap; i++) {
        slot_t sl = t->slots[i];
        if (sl.id < 0) continue;
        int64_t s = sl.h & (cap - 1);
        while (ns[s].id != -1) s = (s + 1) & (cap - 1);
        ns[s] = sl;
    }
    free(t->slots);
    t->slots = ns; t->cap = cap; t->used = live; t->tomb = 0;
    return 0;
}

/* insert; returns 1 when the probe was long for an identity-hashed table (the caller re-hashes it mixed) */
static int tab_insert(index_t *t, uint32_t h, int32_t id) {
    if ((t->used + 1) * 2 > t->cap && tab_grow(t)) return -1;
    int64_t mask = t->cap - 1, s = h & mask, probes = 0;
    while (t->slots[s].id >= 0) { s = (s + 1) & mask; probes++; }
    if (t->slots[s].id == -2) t->tomb--; else t->used++;
    t->slots[s].h = h; t->slots[s].id = id;
    return t->ident && probes > 48;
}

static inline void tab_remove(index_t *t, int64_t s) { t->slots[s].id = -2; t->tomb++; }

/* an identity-hashed table whose keys cluster: hash it mixed from now on */
static int tab_mix(map_t *m, index_t *t) {
    t->ident = 0;
    for (int64_t s = 0; s < t->cap; s++) {
        int32_t id = t->slots[s].id;
        if (id < 0) continue;
        uint32_t h = hkey(ENT(m, id), t);
        t->slots[s].h = h;
        if (t == &m->prim) m->hash[id] = h;
    }
    return tab_grow(t);  /* the slots again, placed by their new hashes */
}

static int pool_grow(map_t *m) {
    int64_t cap = m->pcap ? m->pcap * 2 : 64;
    int64_t *ents = realloc(m->ents, sizeof(int64_t) * cap * m->stride);
    if (!ents) return -1; m->ents = ents;
    uint8_t *live = realloc(m->live, cap); if (!live) return -1; m->live = live;
    uint32_t *hash = realloc(m->hash, sizeof(uint32_t) * cap); if (!hash) return -1; m->hash = hash;
    int32_t *fl = realloc(m->freelist, sizeof(int32_t) * cap); if (!fl) return -1; m->freelist = fl;
    for (int i = 0; i < m->nidx; i++) {
        int32_t *nx = realloc(m->idx[i].next, sizeof(int32_t) * cap); if (!nx) return -1; m->idx[i].next = nx;
        int32_t *pv = realloc(m->idx[i].prev, sizeof(int32_t) * cap); if (!pv) return -1; m->idx[i].prev = pv;
    }
    m->pcap = cap;
    return 0;
}

static inline int32_t map_find_h(const map_t *m, const int64_t *k, uint32_t h) {
    int64_t s = tab_find(m, &m->prim, k, h);
    return s < 0 ? -1 : m->prim.slots[s].id;
}

static inline int32_t map_find(const map_t *m, const int64_t *k) { return map_find_h(m, k, hkey(k, &m->prim)); }

/* the first entry whose key has k's values at index i's positions, or -1 */
static inline int32_t idx_head(const map_t *m, int i, const int64_t *k) {
    const index_t *t = &m->idx[i];
    int64_t s = tab_find(m, t, k, hkey(k, t));
    return s < 0 ? -1 : t->slots[s].id;
}

static int entry_insert(map_t *m, const int64_t *k, val_t v, uint32_t h) {
    int32_t e;
    if (m->nfree) e = m->freelist[--m->nfree];
    else { if (m->ptop == m->pcap && pool_grow(m)) return -1; e = (int32_t)m->ptop++; }
    kcopy(ENT(m, e), k, m->arity);
    VAL(m, e) = v; m->live[e] = 1;
    m->hash[e] = h;
    int r = tab_insert(&m->prim, h, e);
    if (r < 0 || (r > 0 && tab_mix(m, &m->prim))) return -1;
    for (int i = 0; i < m->nidx; i++) {
        index_t *t = &m->idx[i];
        uint32_t hi = hkey(k, t);
        int64_t s = tab_find(m, t, k, hi);
        t->prev[e] = -1;
        if (s >= 0) { int32_t head = t->slots[s].id; t->next[e] = head; t->prev[head] = e; t->slots[s].id = e; }
        else {
            t->next[e] = -1;
            int r = tab_insert(t, hi, e);
            if (r < 0 || (r > 0 && tab_mix(m, t))) return -1;
        }
    }
    m->n++;
    return 0;
}

static void entry_remove(map_t *m, int32_t e) {
    const int64_t *k = ENT(m, e);
    for (int i = 0; i < m->nidx; i++) {
        index_t *t = &m->idx[i];
        int32_t p = t->prev[e], nx = t->next[e];
        if (p >= 0) t->next[p] = nx;
        else {
            int64_t s = tab_find(m, t, k, hkey(k, t));
            if (nx >= 0) t->slots[s].id = nx; else tab_remove(t, s);
        }
        if (nx >= 0) t->prev[nx] = p;
    }
    int64_t mask = m->prim.cap - 1, s = m->hash[e] & mask;
    while (m->prim.slots[s].id != e) s = (s + 1) & mask;
    tab_remove(&m->prim, s);
    m->live[e] = 0; m->freelist[m->nfree++] = e; m->n--;
}

/* set an entry (zero bits remove it), no journal: rollback and loading */
static int map_setv(map_t *m, const int64_t *k, val_t v) {
    uint32_t h = hkey(k, &m->prim);
    int32_t e = map_find_h(m, k, h);
    if (v.i != 0) { if (e >= 0) { VAL(m, e) = v; return 0; } return entry_insert(m, k, v, h); }
    if (e >= 0) entry_remove(m, e);
    return 0;
}

static int journal(rt_t *rt, map_t *m, const int64_t *k, val_t old) {
    if (rt->fail_after > 0 && --rt->fail_after == 0) { rt->failed = 1; return -1; }
    int64_t rec = m->arity + 1;
    if (m->jwn + rec > m->jwcap) {
        int64_t cap = m->jwcap ? m->jwcap * 2 : 1024;
        while (cap < m->jwn + rec) cap *= 2;
        int64_t *j = realloc(m->jw, sizeof(int64_t) * cap); if (!j) return -1;
        m->jw = j; m->jwcap = cap;
    }
    kcopy(m->jw + m->jwn, k, m->arity);
    m->jw[m->jwn + m->arity] = old.i;
    m->jwn += rec;
    return 0;
}

static inline int64_t map_get_i(const map_t *m, const int64_t *k) { int32_t e = map_find(m, k); return e < 0 ? 0 : VAL(m, e).i; }
static inline double map_get_d(const map_t *m, const int64_t *k) { int32_t e = map_find(m, k); return e < 0 ? 0.0 : VAL(m, e).d; }

/* map_add_i / map_add_d with the key's hash in the primary table already known */
static int map_add_i_h(rt_t *rt, map_t *m, const int64_t *k, int64_t d, uint32_t h) {
    int32_t e = map_find_h(m, k, h);
    val_t o; o.i = e < 0 ? 0 : VAL(m, e).i;
    int64_t n;
    if (__builtin_expect(__builtin_add_overflow(o.i, d, &n), 0)) { rt->ovf_map = (int)(m - rt->maps); return RT_OVERFLOW; }
    if (journal(rt, m, k, o)) return -1;
    if (n) { if (e >= 0) { VAL(m, e).i = n; return 0; } val_t v; v.i = n; return entry_insert(m, k, v, h); }
    if (e >= 0) entry_remove(m, e);
    return 0;
}

static int map_add_d_h(rt_t *rt, map_t *m, const int64_t *k, double d, uint32_t h) {
    int32_t e = map_find_h(m, k, h);
    val_t o; if (e < 0) o.i = 0; else o = VAL(m, e);
    double n = o.d + d;
    if (journal(rt, m, k, o)) return -1;
    if (n > m->eps || n < -m->eps) { if (e >= 0) { VAL(m, e).d = n; return 0; } val_t v; v.d = n; return entry_insert(m, k, v, h); }
    if (e >= 0) entry_remove(m, e);
    return 0;
}

static int map_add_i(rt_t *rt, map_t *m, const int64_t *k, int64_t d) { return map_add_i_h(rt, m, k, d, hkey(k, &m->prim)); }
static int map_add_d(rt_t *rt, map_t *m, const int64_t *k, double d) { return map_add_d_h(rt, m, k, d, hkey(k, &m->prim)); }

static void map_init(map_t *m, int arity, int isfloat, double eps) {
    memset(m, 0, sizeof(*m));
    m->arity = arity; m->stride = arity + 1; m->isfloat = isfloat; m->eps = eps;
    m->prim.npos = arity;
    for (int i = 0; i < arity; i++) m->prim.pos[i] = i;
}

static void map_add_index(map_t *m, int npos, const int *pos) {
    index_t *t = &m->idx[m->nidx++];
    t->npos = npos;
    for (int i = 0; i < npos; i++) t->pos[i] = pos[i];
}

static void map_release(map_t *m) {
    free(m->ents); free(m->live); free(m->hash); free(m->freelist); free(m->prim.slots);
    for (int i = 0; i < m->nidx; i++) { free(m->idx[i].slots); free(m->idx[i].next); free(m->idx[i].prev); }
    free(m->jw); free(m->jl); free(m->pend);
}

static void map_empty(map_t *m) {
    for (int64_t e = 0; e < m->ptop; e++) m->live[e] = 0;
    m->n = 0; m->ptop = 0; m->nfree = 0;
    for (int64_t s = 0; s < m->prim.cap; s++) m->prim.slots[s].id = -1;
    m->prim.used = m->prim.tomb = 0;
    for (int i = 0; i < m->nidx; i++) {
        index_t *t = &m->idx[i];
        for (int64_t s = 0; s < t->cap; s++) t->slots[s].id = -1;
        t->used = t->tomb = 0;
    }
    m->jwn = m->jln = m->pendn = 0; m->overflow = 0;
}
"""

SOURCE = _TYPES + VALUES + _MAPS + QUEUE + STRINGS + API + SLICES
