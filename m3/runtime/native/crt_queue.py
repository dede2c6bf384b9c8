"""The update queue of the generated triggers: updates of maps a trigger never reads, applied in batches.

Why: the triggers are memory-bound (docs/dataplane.md, "Prefetch hints"):
an update is two cache misses taken in turn, the slot and then the entry,
and an update keyed through a slice's entry (Q3's lineitem -> revenue) cannot
be hinted rows ahead because its key is not known until the slice is read.
Queued, ``UPD_BATCH`` updates' keys are known at once: applying the queue
hashes every key and hints its primary slot and its indexes' slots to the
cache, then every entry those slots name, then does the updates in order, so
their misses overlap instead of coming one after another.

Why it keeps results: only a map the trigger never reads is queued
(:func:`.ctrigger.deferred_maps`), so no statement can see an update late;
each map gets the same updates in the same order (the same journal, the
same float sums, an entry removed at zero and inserted again alike).  A
failure (out of memory, overflow, an injected one) leaves the trigger with
the queue's rest undone, and the batch is rolled back as before.  The queue
lives on the trigger's stack, so nothing outlives a call.

>>> "upd_flush(" in QUEUE and "UPD_BATCH" in QUEUE
True
"""

QUEUE = r"""
/* updates of maps the trigger never reads, queued in order and applied UPD_BATCH at a time (see above) */
#define UPD_BATCH 32
/* h: the key's hash in m's primary table, hashed as it was then (ident) */
typedef struct { map_t *m; int isd, ident; uint32_t h; val_t d; int64_t k[16]; } upd_t;
typedef struct { int n; upd_t u[UPD_BATCH]; } updq_t;

static int upd_flush(rt_t *rt, updq_t *q) {
    int n = q->n;
    q->n = 0;
    uint32_t hi[UPD_BATCH][8];  /* each update's hash in each of its map's indexes (an insert links the entry in) */
    for (int i = 0; i < n; i++) {
        upd_t *u = &q->u[i];
        const map_t *m = u->m;
        u->h = hkey(u->k, &m->prim); u->ident = m->prim.ident;
        pf_slot_h(&m->prim, u->h);
        for (int j = 0; j < m->nidx; j++) { hi[i][j] = hkey(u->k, &m->idx[j]); pf_slot_h(&m->idx[j], hi[i][j]); }
    }
    for (int i = 0; i < n; i++) {
        const upd_t *u = &q->u[i];
        const map_t *m = u->m;
        pf_entry_h(m, &m->prim, u->h);
        for (int j = 0; j < m->nidx; j++) pf_entry_h(m, &m->idx[j], hi[i][j]);
    }
    for (int i = 0; i < n; i++) {
        upd_t *u = &q->u[i];
        /* an earlier update of this queue may have re-hashed the table mixed (tab_mix): then hash the key again */
        uint32_t h = u->m->prim.ident == u->ident ? u->h : hkey(u->k, &u->m->prim);
        int rc = u->isd ? map_add_d_h(rt, u->m, u->k, u->d.d, h) : map_add_i_h(rt, u->m, u->k, u->d.i, h);
        if (rc) return rc;
    }
    return 0;
}

/* queue an update (the key's arity columns copied); a full queue is applied at once */
static inline int upd_push(rt_t *rt, updq_t *q, map_t *m, const int64_t *k, int isd, val_t d) {
    upd_t *u = &q->u[q->n++];
    u->m = m; u->isd = isd; u->d = d;
    kcopy(u->k, k, m->arity);
    return q->n == UPD_BATCH ? upd_flush(rt, q) : 0;
}
static inline int upd_d(rt_t *rt, updq_t *q, map_t *m, const int64_t *k, double d) { val_t v; v.d = d; return upd_push(rt, q, m, k, 1, v); }
static inline int upd_i(rt_t *rt, updq_t *q, map_t *m, const int64_t *k, int64_t d) { val_t v; v.i = d; return upd_push(rt, q, m, k, 0, v); }
"""
