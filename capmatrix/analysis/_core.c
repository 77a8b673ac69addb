/* The compiled diagram core: the twin of _pycore.py in C (same arguments, same node ids).
 *
 * A node is an int32 id: 0 the empty region, 1 the whole universe, the rest numbered as built. Per
 * node the store keeps its level and its children (one per value of the level's axis) in one pool;
 * a hash table over (level, children) keeps nodes unique, and the walks' computed tables are lossy
 * caches keyed by node pairs (below). Every walk goes strictly down the levels, so each level owns
 * one scratch row for the children it builds: nothing is allocated per node visited. The tables are
 * read at random, millions of times per role: memory latency, not arithmetic, sets the pace.
 *
 * Counts (cells, boxes) are exact: 128-bit sums, and Python ints past that. Built by the package's
 * build hook (hatch_build.py); where it is absent, _pycore.py stands in.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#ifndef CORE_SOURCE_SHA256
#define CORE_SOURCE_SHA256 "unknown"
#endif

typedef unsigned __int128 u128;
typedef int32_t node_t;

#define EMPTY 0
#define FULL 1
#define NONE_ (-1)   /* "no entry" in a memo, and the error return of a walk */

/* ---------------------------------------------------------------------------------------------- */
/* Open-addressing tables keyed by 64 bits (never 0: pairs of non-terminal nodes, nodes + 1).      */

/* Large tables are read at random: on Linux, ask for huge pages (fewer TLB misses); a hint only. */
static void huge(void *p, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (bytes < ((size_t)4 << 20)) return;
    uintptr_t start = ((uintptr_t)p + 4095) & ~(uintptr_t)4095, end = ((uintptr_t)p + bytes) & ~(uintptr_t)4095;
    if (end > start) (void)madvise((void *)start, end - start, MADV_HUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}

typedef struct {
    uint64_t key;
    int64_t val;
} Slot;

typedef struct {
    Slot *slots;  /* key and value side by side: one cache line per probe */
    size_t mask, used;
} Memo;

static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static void memo_free(Memo *m) {
    PyMem_Free(m->slots);
    m->slots = NULL;
    m->mask = 0;
    m->used = 0;
}

static inline int memo_get(const Memo *m, uint64_t key, int64_t *val) {
    if (!m->slots) return 0;
    size_t i = mix64(key) & m->mask;
    for (;;) {
        const Slot *s = m->slots + i;
        if (s->key == key) { *val = s->val; return 1; }
        if (s->key == 0) return 0;
        i = (i + 1) & m->mask;
    }
}

static int memo_grow(Memo *m) {
    size_t cap = m->slots ? (m->mask + 1) * 2 : 1024;
    Slot *slots = PyMem_Calloc(cap, sizeof(Slot));
    if (!slots) { PyErr_NoMemory(); return -1; }
    if (m->slots) {
        for (size_t j = 0; j <= m->mask; j++) {
            Slot s = m->slots[j];
            if (!s.key) continue;
            size_t i = mix64(s.key) & (cap - 1);
            while (slots[i].key) i = (i + 1) & (cap - 1);
            slots[i] = s;
        }
    }
    PyMem_Free(m->slots);
    m->slots = slots;
    m->mask = cap - 1;
    return 0;
}

static int memo_put(Memo *m, uint64_t key, int64_t val) {
    if (!m->slots || (m->used + 1) * 2 > m->mask + 1) {
        if (memo_grow(m) < 0) return -1;
    }
    size_t i = mix64(key) & m->mask;
    while (m->slots[i].key && m->slots[i].key != key) i = (i + 1) & m->mask;
    if (!m->slots[i].key) m->used++;
    m->slots[i].key = key;
    m->slots[i].val = val;
    return 0;
}

/* The walks' computed tables are lossy caches, as in BDD packages: one slot per hash, a newer pair
 * taking an older one's place. A pair computed again finds every node of its result in the unique
 * table, so the answers and the node ids are those of the exact memo; the memory stays bounded. */
#define CACHE_MIN ((size_t)1 << 12)
#define CACHE_MAX ((size_t)1 << 22)

typedef struct {
    Slot *slots;
    size_t mask;
} Cache;

static inline int cache_get(const Cache *m, uint64_t key, int64_t *val) {
    const Slot *s = m->slots + (mix64(key) & m->mask);
    if (s->key == key) { *val = s->val; return 1; }
    return 0;
}

static inline void cache_put(Cache *m, uint64_t key, int64_t val) {
    Slot *s = m->slots + (mix64(key) & m->mask);
    s->key = key;
    s->val = val;
}

static int cache_resize(Cache *m, size_t cap) {
    Slot *slots = PyMem_Calloc(cap, sizeof(Slot));
    if (!slots) { PyErr_NoMemory(); return -1; }
    huge(slots, cap * sizeof(Slot));
    if (m->slots) {
        for (size_t j = 0; j <= m->mask; j++) {
            if (m->slots[j].key) slots[mix64(m->slots[j].key) & (cap - 1)] = m->slots[j];
        }
    }
    PyMem_Free(m->slots);
    m->slots = slots;
    m->mask = cap - 1;
    return 0;
}

static void cache_free(Cache *m) {
    PyMem_Free(m->slots);
    m->slots = NULL;
    m->mask = 0;
}

static inline uint64_t pair_key(node_t a, node_t b) { return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b; }

/* ---------------------------------------------------------------------------------------------- */
/* The store.                                                                                      */

typedef struct {
    node_t node;
    uint32_t hash;
} UniqSlot;

typedef struct {
    int64_t off;     /* where its children start in the pool */
    int32_t level;
    int32_t spare;
} Rec;

typedef struct {
    PyObject_HEAD
    int width;
    int32_t *sizes;      /* level -> values of its axis */
    int32_t *axes;       /* level -> axis position */
    int64_t *start;      /* level -> offset of its scratch rows */
    node_t *row_a, *row_b, *row_out;   /* per-level scratch rows (offsets: start) */
    /* nodes */
    Rec *rec;            /* node -> its level and its children's offset in the pool */
    size_t n, cap;
    node_t *pool;
    size_t pool_n, pool_cap;
    /* unique table: node ids (0: free) beside their hash, compared before the children are */
    UniqSlot *uniq;
    size_t uniq_mask, uniq_used;
    Cache or_m, and_m, minus_m, within_m, apart_m;
    size_t cache_cap;    /* slots per cache: grows with the nodes, up to CACHE_MAX */
    Memo cells_m, paths_m[2];  /* values: index into the u128 arrays below */
    u128 *counts;
    size_t counts_n, counts_cap;
    u128 *skip;          /* skip[l]: cells of the levels from l to the last (width + 1 entries) */
    uint8_t *skip_ok;    /* whether skip[l] fits in 128 bits */
} Core;

static inline const node_t *kids_of(const Core *c, node_t n) { return c->pool + c->rec[n].off; }

static uint64_t hash_kids(int level, const node_t *kids, int size) {
    uint64_t h = 0x9e3779b97f4a7c15ULL * (uint64_t)(level + 1);
    for (int v = 0; v < size; v++) {
        h = (h ^ (uint32_t)kids[v]) * 0x100000001b3ULL;
        h ^= h >> 29;
    }
    return mix64(h);
}

static int uniq_grow(Core *c) {
    size_t cap = c->uniq ? (c->uniq_mask + 1) * 2 : 1024;
    UniqSlot *table = PyMem_Calloc(cap, sizeof(UniqSlot));
    if (!table) { PyErr_NoMemory(); return -1; }
    huge(table, cap * sizeof(UniqSlot));
    if (c->uniq) {
        for (size_t j = 0; j <= c->uniq_mask; j++) {
            UniqSlot s = c->uniq[j];
            if (!s.node) continue;
            size_t i = s.hash & (cap - 1);
            while (table[i].node) i = (i + 1) & (cap - 1);
            table[i] = s;
        }
    }
    PyMem_Free(c->uniq);
    c->uniq = table;
    c->uniq_mask = cap - 1;
    return 0;
}

/* The caches sized for the store: a slot per node, between CACHE_MIN and CACHE_MAX. */
static int caches_fit(Core *c) {
    size_t want = c->cache_cap ? c->cache_cap : CACHE_MIN;
    while (want < c->n && want < CACHE_MAX) want *= 2;
    Cache *all[] = {&c->or_m, &c->and_m, &c->minus_m, &c->within_m, &c->apart_m};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
        if ((!all[k]->slots || all[k]->mask + 1 != want) && cache_resize(all[k], want) < 0) return -1;
    }
    c->cache_cap = want;
    return 0;
}

/* The node testing `lv` with children `kids` (reduced, unique); NONE_ with an exception set. */
static node_t make(Core *c, int lv, const node_t *kids) {
    int size = c->sizes[lv];
    node_t first = kids[0];
    int same = 1;
    for (int v = 1; v < size; v++) {
        if (kids[v] != first) { same = 0; break; }
    }
    if (same) return first;
    if (!c->uniq || (c->uniq_used + 1) * 2 > c->uniq_mask + 1) {
        if (uniq_grow(c) < 0) return NONE_;
    }
    uint32_t h = (uint32_t)(hash_kids(lv, kids, size) >> 32);
    size_t i = h & c->uniq_mask;
    for (;;) {
        UniqSlot s = c->uniq[i];
        if (!s.node) break;
        if (s.hash == h && c->rec[s.node].level == lv
            && memcmp(kids_of(c, s.node), kids, (size_t)size * sizeof(node_t)) == 0) return s.node;
        i = (i + 1) & c->uniq_mask;
    }
    if (c->n >= (size_t)INT32_MAX) {
        PyErr_SetString(PyExc_MemoryError, "capmatrix: a diagram store is limited to 2**31 nodes");
        return NONE_;
    }
    if (c->n == c->cap) {
        size_t cap = c->cap * 2;
        Rec *rec = PyMem_Realloc(c->rec, cap * sizeof(Rec));
        if (!rec) { PyErr_NoMemory(); return NONE_; }
        c->rec = rec;
        c->cap = cap;
        huge(rec, cap * sizeof(Rec));
    }
    if (c->pool_n + (size_t)size > c->pool_cap) {
        size_t cap = c->pool_cap * 2;
        while (c->pool_n + (size_t)size > cap) cap *= 2;
        node_t *pool = PyMem_Realloc(c->pool, cap * sizeof(node_t));
        if (!pool) { PyErr_NoMemory(); return NONE_; }
        c->pool = pool;
        c->pool_cap = cap;
        huge(pool, cap * sizeof(node_t));
    }
    /* every caller passes a scratch row, never a node's own children: the pool may have moved */
    memcpy(c->pool + c->pool_n, kids, (size_t)size * sizeof(node_t));
    node_t node = (node_t)c->n;
    c->rec[node].level = lv;
    c->rec[node].off = (int64_t)c->pool_n;
    c->rec[node].spare = 0;
    c->pool_n += (size_t)size;
    c->n++;
    c->uniq[i].node = node;
    c->uniq[i].hash = h;
    c->uniq_used++;
    if (c->n > c->cache_cap && c->cache_cap < CACHE_MAX && caches_fit(c) < 0) return NONE_;
    return node;
}

/* The level two non-terminal operands meet at, their children copied into that level's rows. */
static int align(Core *c, node_t a, node_t b, node_t **ka, node_t **kb) {
    int la = c->rec[a].level, lb = c->rec[b].level;
    int lv = la < lb ? la : lb;
    int size = c->sizes[lv];
    node_t *ra = c->row_a + c->start[lv], *rb = c->row_b + c->start[lv];
    if (la == lv) memcpy(ra, kids_of(c, a), (size_t)size * sizeof(node_t));
    else for (int v = 0; v < size; v++) ra[v] = a;
    if (lb == lv) memcpy(rb, kids_of(c, b), (size_t)size * sizeof(node_t));
    else for (int v = 0; v < size; v++) rb[v] = b;
    *ka = ra;
    *kb = rb;
    return lv;
}

static node_t join(Core *c, node_t a, node_t b) {
    if (a == FULL || b == FULL) return FULL;
    if (a == EMPTY || a == b) return b;
    if (b == EMPTY) return a;
    if (a > b) { node_t t = a; a = b; b = t; }
    int64_t found;
    uint64_t key = pair_key(a, b);
    if (cache_get(&c->or_m, key, &found)) return (node_t)found;
    node_t *ka, *kb;
    int lv = align(c, a, b, &ka, &kb);
    node_t *out = c->row_out + c->start[lv];
    for (int v = 0; v < c->sizes[lv]; v++) {
        node_t r = join(c, ka[v], kb[v]);
        if (r < 0) return NONE_;
        out[v] = r;
    }
    node_t r = make(c, lv, out);
    if (r < 0) return NONE_;
    cache_put(&c->or_m, key, r);
    return r;
}

static node_t meet(Core *c, node_t a, node_t b) {
    if (a == EMPTY || b == EMPTY) return EMPTY;
    if (a == FULL || a == b) return b;
    if (b == FULL) return a;
    if (a > b) { node_t t = a; a = b; b = t; }
    int64_t found;
    uint64_t key = pair_key(a, b);
    if (cache_get(&c->and_m, key, &found)) return (node_t)found;
    node_t *ka, *kb;
    int lv = align(c, a, b, &ka, &kb);
    node_t *out = c->row_out + c->start[lv];
    for (int v = 0; v < c->sizes[lv]; v++) {
        node_t r = meet(c, ka[v], kb[v]);
        if (r < 0) return NONE_;
        out[v] = r;
    }
    node_t r = make(c, lv, out);
    if (r < 0) return NONE_;
    cache_put(&c->and_m, key, r);
    return r;
}

static node_t minus(Core *c, node_t a, node_t b) {
    if (a == EMPTY || b == FULL || a == b) return EMPTY;
    if (b == EMPTY) return a;
    int64_t found;
    uint64_t key = pair_key(a, b);
    if (cache_get(&c->minus_m, key, &found)) return (node_t)found;
    node_t *ka, *kb;
    int lv = align(c, a, b, &ka, &kb);
    node_t *out = c->row_out + c->start[lv];
    for (int v = 0; v < c->sizes[lv]; v++) {
        node_t r = minus(c, ka[v], kb[v]);
        if (r < 0) return NONE_;
        out[v] = r;
    }
    node_t r = make(c, lv, out);
    if (r < 0) return NONE_;
    cache_put(&c->minus_m, key, r);
    return r;
}

/* 1, 0, or -1 with an exception set. */
static int within(Core *c, node_t a, node_t b) {
    if (a == EMPTY || b == FULL || a == b) return 1;
    if (b == EMPTY || a == FULL) return 0;
    int64_t found;
    uint64_t key = pair_key(a, b);
    if (cache_get(&c->within_m, key, &found)) return (int)found;
    if (cache_get(&c->minus_m, key, &found)) return found == EMPTY;
    node_t *ka, *kb;
    int lv = align(c, a, b, &ka, &kb);
    int held = 1;
    for (int v = 0; v < c->sizes[lv] && held == 1; v++) {
        /* the rows of this level are rewritten by no deeper call: read them in place */
        held = within(c, ka[v], kb[v]);
    }
    if (held < 0) return -1;
    cache_put(&c->within_m, key, held);
    return held;
}

static int intersects(Core *c, node_t a, node_t b) {
    if (a == EMPTY || b == EMPTY) return 0;
    if (a == FULL || b == FULL || a == b) return 1;
    if (a > b) { node_t t = a; a = b; b = t; }
    int64_t found;
    uint64_t key = pair_key(a, b);
    if (cache_get(&c->apart_m, key, &found)) return (int)found;
    if (cache_get(&c->and_m, key, &found)) return found != EMPTY;
    node_t *ka, *kb;
    int lv = align(c, a, b, &ka, &kb);
    int shared = 0;
    for (int v = 0; v < c->sizes[lv] && shared == 0; v++) shared = intersects(c, ka[v], kb[v]);
    if (shared < 0) return -1;
    cache_put(&c->apart_m, key, shared);
    return shared;
}

/* ---------------------------------------------------------------------------------------------- */
/* A kernel's rules, top-down: the state below a node is the set of boxes still live (W words).   */

typedef struct {
    int W;
    uint64_t *constrained, *pending, *admit, *grants, *excl;  /* per level (admit: per value) */
    int64_t *admit_start;                                     /* level -> first row of admit */
    uint64_t *cur, *sub;                                      /* per level scratch sets */
    /* memo of (level, live set) -> node: the sets in an arena, an index table over them */
    uint64_t *keys;
    int32_t *key_level;
    node_t *vals;
    size_t n, cap;
    int64_t *table;   /* entry + 1; 0: free */
    size_t mask, used;
} Rules;

static uint64_t hash_set(int lv, const uint64_t *s, int W) {
    uint64_t h = 0x9e3779b97f4a7c15ULL * (uint64_t)(lv + 1);
    for (int w = 0; w < W; w++) h = mix64(h ^ s[w]);
    return h;
}

static int rules_lookup(const Rules *r, int lv, const uint64_t *s, node_t *out) {
    if (!r->table) return 0;
    size_t i = hash_set(lv, s, r->W) & r->mask;
    for (;;) {
        int64_t e = r->table[i];
        if (!e) return 0;
        e--;
        if (r->key_level[e] == lv && memcmp(r->keys + e * r->W, s, (size_t)r->W * 8) == 0) {
            *out = r->vals[e];
            return 1;
        }
        i = (i + 1) & r->mask;
    }
}

static int rules_store(Rules *r, int lv, const uint64_t *s, node_t val) {
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 256;
        uint64_t *keys = PyMem_Realloc(r->keys, cap * (size_t)r->W * 8);
        if (!keys) { PyErr_NoMemory(); return -1; }
        r->keys = keys;
        int32_t *kl = PyMem_Realloc(r->key_level, cap * sizeof(int32_t));
        if (!kl) { PyErr_NoMemory(); return -1; }
        r->key_level = kl;
        node_t *vals = PyMem_Realloc(r->vals, cap * sizeof(node_t));
        if (!vals) { PyErr_NoMemory(); return -1; }
        r->vals = vals;
        r->cap = cap;
    }
    if (!r->table || (r->used + 1) * 2 > r->mask + 1) {
        size_t cap = r->table ? (r->mask + 1) * 2 : 512;
        int64_t *table = PyMem_Calloc(cap, sizeof(int64_t));
        if (!table) { PyErr_NoMemory(); return -1; }
        for (size_t e = 0; e < r->n; e++) {
            size_t i = hash_set(r->key_level[e], r->keys + e * r->W, r->W) & (cap - 1);
            while (table[i]) i = (i + 1) & (cap - 1);
            table[i] = (int64_t)e + 1;
        }
        PyMem_Free(r->table);
        r->table = table;
        r->mask = cap - 1;
    }
    size_t e = r->n++;
    memcpy(r->keys + e * r->W, s, (size_t)r->W * 8);
    r->key_level[e] = lv;
    r->vals[e] = val;
    size_t i = hash_set(lv, s, r->W) & r->mask;
    while (r->table[i]) i = (i + 1) & r->mask;
    r->table[i] = (int64_t)e + 1;
    r->used++;
    return 0;
}

static node_t rules_walk(Core *c, Rules *r, int entry, const uint64_t *live) {
    const int W = r->W, width = c->width;
    node_t found;
    if (rules_lookup(r, entry, live, &found)) return found;
    int lv = entry;
    for (; lv < width; lv++) {  /* skip the levels no live box tests */
        const uint64_t *con = r->constrained + (size_t)lv * W;
        int any = 0;
        for (int w = 0; w < W; w++) if (live[w] & con[w]) { any = 1; break; }
        if (any) break;
    }
    const uint64_t *rest = r->pending + (size_t)lv * W;
    int has_e = 0, outside = 0, covering = -1;
    for (int w = 0; w < W; w++) {
        uint64_t e = live[w] & r->excl[w];
        if (e) has_e = 1;
        if (e & ~rest[w]) outside = 1;
        uint64_t cov = live[w] & r->grants[w] & ~rest[w];
        if (cov && covering < 0) covering = w;
    }
    node_t result;
    if (outside) {
        result = EMPTY;  /* a live exclusion holds every cell below */
    } else if (covering >= 0 && !has_e) {
        result = FULL;   /* a live grant holds every cell below and nothing excludes */
    } else {
        uint64_t *cur = r->cur + (size_t)lv * W;
        if (covering >= 0) {  /* one covering grant decides as well as all */
            for (int w = 0; w < W; w++) cur[w] = live[w] & r->excl[w];
            uint64_t cov = live[covering] & r->grants[covering] & ~rest[covering];
            cur[covering] |= cov & (~cov + 1);
        } else {
            memcpy(cur, live, (size_t)W * 8);
        }
        /* the state after the skip and the reduction: its own memo key, unless it is the entry's */
        int same = lv == entry && covering < 0;
        if (same || !rules_lookup(r, lv, cur, &result)) {
            int size = c->sizes[lv];
            node_t *out = c->row_out + c->start[lv];
            uint64_t *sub = r->sub + (size_t)lv * W;
            const uint64_t *admit = r->admit + (size_t)r->admit_start[lv] * W;
            for (int v = 0; v < size; v++) {
                const uint64_t *adm = admit + (size_t)v * W;
                int granted = 0;
                for (int w = 0; w < W; w++) {
                    sub[w] = cur[w] & adm[w];
                    if (sub[w] & r->grants[w]) granted = 1;
                }
                node_t kid = EMPTY;
                if (granted) {
                    kid = rules_walk(c, r, lv + 1, sub);
                    if (kid < 0) return NONE_;
                }
                out[v] = kid;
            }
            result = make(c, lv, out);
            if (result < 0 || rules_store(r, lv, cur, result) < 0) return NONE_;
        }
        if (same) return result;
    }
    if (rules_store(r, entry, live, result) < 0) return NONE_;
    return result;
}

/* Python int (>= 0) -> W little-endian words; -1 with an exception set. */
static int to_words(PyObject *x, uint64_t *out, int W) {
    if (!PyLong_Check(x)) {
        PyErr_SetString(PyExc_TypeError, "capmatrix: a box set must be an int");
        return -1;
    }
    Py_INCREF(x);
    PyObject *shift = PyLong_FromLong(64);
    if (!shift) { Py_DECREF(x); return -1; }
    for (int w = 0; w < W; w++) {
        out[w] = PyLong_AsUnsignedLongLongMask(x);
        if (out[w] == (uint64_t)-1 && PyErr_Occurred()) { Py_DECREF(x); Py_DECREF(shift); return -1; }
        if (w + 1 < W) {
            PyObject *next = PyNumber_Rshift(x, shift);
            Py_DECREF(x);
            if (!next) { Py_DECREF(shift); return -1; }
            x = next;
        }
    }
    Py_DECREF(x);
    Py_DECREF(shift);
    return 0;
}

static void rules_free(Rules *r) {
    PyMem_Free(r->constrained);
    PyMem_Free(r->pending);
    PyMem_Free(r->admit);
    PyMem_Free(r->grants);
    PyMem_Free(r->excl);
    PyMem_Free(r->admit_start);
    PyMem_Free(r->cur);
    PyMem_Free(r->sub);
    PyMem_Free(r->keys);
    PyMem_Free(r->key_level);
    PyMem_Free(r->vals);
    PyMem_Free(r->table);
}

static int ready(Core *c);

static PyObject *Core_rules(Core *c, PyObject *args) {
    PyObject *constrained, *admit, *pending, *grants, *excl;
    if (ready(c) < 0) return NULL;
    if (!PyArg_ParseTuple(args, "OOOOO:rules", &constrained, &admit, &pending, &grants, &excl)) return NULL;
    PyObject *live_obj = PyNumber_Or(grants, excl);
    if (!live_obj) return NULL;
    PyObject *nbits = PyObject_CallMethod(live_obj, "bit_length", NULL);
    Py_DECREF(live_obj);
    if (!nbits) return NULL;
    long long bits = PyLong_AsLongLong(nbits);
    Py_DECREF(nbits);
    if (bits < 0) return NULL;
    if (bits == 0) return PyLong_FromLong(EMPTY);
    const int width = c->width;
    Rules r;
    memset(&r, 0, sizeof r);
    r.W = (int)((bits + 63) / 64);
    const int W = r.W;
    size_t rows = 0;
    r.admit_start = PyMem_Malloc((size_t)(width + 1) * sizeof(int64_t));
    if (!r.admit_start) { PyErr_NoMemory(); return NULL; }
    for (int lv = 0; lv < width; lv++) { r.admit_start[lv] = (int64_t)rows; rows += (size_t)c->sizes[lv]; }
    r.admit_start[width] = (int64_t)rows;
    r.constrained = PyMem_Calloc((size_t)(width + 1) * W, 8);
    r.pending = PyMem_Calloc((size_t)(width + 1) * W, 8);
    r.admit = PyMem_Calloc(rows ? rows * W : 1, 8);
    r.grants = PyMem_Calloc(W, 8);
    r.excl = PyMem_Calloc(W, 8);
    r.cur = PyMem_Calloc((size_t)(width + 1) * W, 8);
    r.sub = PyMem_Calloc((size_t)(width + 1) * W, 8);
    uint64_t *live = PyMem_Calloc(W, 8);
    PyObject *result = NULL;
    if (!r.constrained || !r.pending || !r.admit || !r.grants || !r.excl || !r.cur || !r.sub || !live) {
        PyErr_NoMemory();
        goto done;
    }
    if (!PySequence_Check(constrained) || !PySequence_Check(admit) || !PySequence_Check(pending)
        || PySequence_Size(constrained) < width || PySequence_Size(admit) < width
        || PySequence_Size(pending) < width + 1) {
        PyErr_SetString(PyExc_ValueError, "capmatrix: rules needs a row per level");
        goto done;
    }
    for (int lv = 0; lv <= width; lv++) {
        PyObject *p = PySequence_GetItem(pending, lv);
        if (!p) goto done;
        int bad = to_words(p, r.pending + (size_t)lv * W, W);
        Py_DECREF(p);
        if (bad) goto done;
        if (lv == width) break;
        PyObject *k = PySequence_GetItem(constrained, lv);
        if (!k) goto done;
        bad = to_words(k, r.constrained + (size_t)lv * W, W);
        Py_DECREF(k);
        if (bad) goto done;
        PyObject *row = PySequence_GetItem(admit, lv);
        if (!row) goto done;
        if (!PySequence_Check(row) || PySequence_Size(row) != c->sizes[lv]) {
            Py_DECREF(row);
            PyErr_SetString(PyExc_ValueError, "capmatrix: rules needs an admit set per value");
            goto done;
        }
        for (int v = 0; v < c->sizes[lv]; v++) {
            PyObject *a = PySequence_GetItem(row, v);
            if (!a) { Py_DECREF(row); goto done; }
            bad = to_words(a, r.admit + ((size_t)r.admit_start[lv] + v) * W, W);
            Py_DECREF(a);
            if (bad) { Py_DECREF(row); goto done; }
        }
        Py_DECREF(row);
    }
    if (to_words(grants, r.grants, W) < 0 || to_words(excl, r.excl, W) < 0) goto done;
    for (int w = 0; w < W; w++) {  /* past the last level no box is tested: the walk stops there */
        if (r.pending[(size_t)width * W + w]) {
            PyErr_SetString(PyExc_ValueError, "capmatrix: no box is pending past the last level");
            goto done;
        }
    }
    int granted = 0;
    for (int w = 0; w < W; w++) {
        r.grants[w] &= ~r.excl[w];
        live[w] = r.grants[w] | r.excl[w];
        if (r.grants[w]) granted = 1;
    }
    if (!granted) { result = PyLong_FromLong(EMPTY); goto done; }
    node_t node = rules_walk(c, &r, 0, live);
    if (node >= 0) result = PyLong_FromLong(node);
done:
    PyMem_Free(live);
    rules_free(&r);
    return result;
}

/* ---------------------------------------------------------------------------------------------- */
/* Counting: 128-bit exact sums; -1 when a count does not fit (the caller redoes it in Python ints). */

static int count_store(Core *c, Memo *m, node_t n, u128 v) {
    if (c->counts_n == c->counts_cap) {
        size_t cap = c->counts_cap ? c->counts_cap * 2 : 1024;
        u128 *counts = PyMem_Realloc(c->counts, cap * sizeof(u128));
        if (!counts) { PyErr_NoMemory(); return -1; }
        c->counts = counts;
        c->counts_cap = cap;
    }
    c->counts[c->counts_n] = v;
    return memo_put(m, (uint64_t)n + 1, (int64_t)c->counts_n++);
}

/* 0 and *out set; 1 on overflow; -1 on error. */
static int cells128(Core *c, node_t n, u128 *out) {
    int64_t at;
    if (memo_get(&c->cells_m, (uint64_t)n + 1, &at)) { *out = c->counts[at]; return 0; }
    int lv = c->rec[n].level;
    u128 total = 0;
    for (int v = 0; v < c->sizes[lv]; v++) {
        node_t kid = kids_of(c, n)[v];
        if (kid == EMPTY) continue;
        int kl = kid == FULL ? c->width : c->rec[kid].level;
        u128 below = 1;
        if (kid != FULL) {
            int s = cells128(c, kid, &below);
            if (s) return s;
        }
        /* the levels between this node and its child count whole: skip[l+1] / skip[kl] */
        if (!c->skip_ok[lv + 1]) return 1;
        u128 between = c->skip[lv + 1] / c->skip[kl];
        u128 part;
        if (__builtin_mul_overflow(below, between, &part)) return 1;
        if (__builtin_add_overflow(total, part, &total)) return 1;
    }
    if (count_store(c, &c->cells_m, n, total) < 0) return -1;
    *out = total;
    return 0;
}

static int paths128(Core *c, node_t n, int negated, u128 *out) {
    if (n <= FULL) { *out = (u128)((n == FULL) != negated); return 0; }
    Memo *m = &c->paths_m[negated];
    int64_t at;
    if (memo_get(m, (uint64_t)n + 1, &at)) { *out = c->counts[at]; return 0; }
    int size = c->sizes[c->rec[n].level];
    u128 total = 0;
    for (int v = 0; v < size; v++) {
        node_t kid = kids_of(c, n)[v];
        int seen = 0;
        for (int u = 0; u < v && !seen; u++) seen = kids_of(c, n)[u] == kid;
        if (seen) continue;  /* each distinct child once: a shared child is one box mask */
        u128 below;
        int s = paths128(c, kid, negated, &below);
        if (s) return s;
        if (__builtin_add_overflow(total, below, &total)) return 1;
    }
    if (count_store(c, m, n, total) < 0) return -1;
    *out = total;
    return 0;
}

static PyObject *from_u128(u128 v) {
    PyObject *hi = PyLong_FromUnsignedLongLong((unsigned long long)(v >> 64));
    PyObject *lo = PyLong_FromUnsignedLongLong((unsigned long long)v);
    PyObject *shift = PyLong_FromLong(64);
    PyObject *out = NULL;
    if (hi && lo && shift) {
        PyObject *up = PyNumber_Lshift(hi, shift);
        if (up) { out = PyNumber_Or(up, lo); Py_DECREF(up); }
    }
    Py_XDECREF(hi);
    Py_XDECREF(lo);
    Py_XDECREF(shift);
    return out;
}

/* Past 128 bits: the same sums in Python ints, memoised in a dict for this call. */
static PyObject *cells_big(Core *c, node_t n, PyObject *memo, PyObject **skip) {
    PyObject *key = PyLong_FromLong(n);
    if (!key) return NULL;
    PyObject *found = PyDict_GetItemWithError(memo, key);
    if (found || PyErr_Occurred()) { Py_DECREF(key); Py_XINCREF(found); return found; }
    int lv = c->rec[n].level;
    PyObject *total = PyLong_FromLong(0);
    for (int v = 0; total && v < c->sizes[lv]; v++) {
        node_t kid = kids_of(c, n)[v];
        if (kid == EMPTY) continue;
        int kl = kid == FULL ? c->width : c->rec[kid].level;
        PyObject *below = kid == FULL ? PyLong_FromLong(1) : cells_big(c, kid, memo, skip);
        PyObject *between = below ? PyNumber_FloorDivide(skip[lv + 1], skip[kl]) : NULL;
        PyObject *part = between ? PyNumber_Multiply(below, between) : NULL;
        PyObject *sum = part ? PyNumber_Add(total, part) : NULL;
        Py_XDECREF(below);
        Py_XDECREF(between);
        Py_XDECREF(part);
        Py_DECREF(total);
        total = sum;
    }
    if (total && PyDict_SetItem(memo, key, total) < 0) Py_CLEAR(total);
    Py_DECREF(key);
    return total;
}

static PyObject *paths_big(Core *c, node_t n, int negated, PyObject *memo) {
    if (n <= FULL) return PyLong_FromLong((n == FULL) != negated);
    PyObject *key = PyLong_FromLong(n);
    if (!key) return NULL;
    PyObject *found = PyDict_GetItemWithError(memo, key);
    if (found || PyErr_Occurred()) { Py_DECREF(key); Py_XINCREF(found); return found; }
    int size = c->sizes[c->rec[n].level];
    PyObject *total = PyLong_FromLong(0);
    for (int v = 0; total && v < size; v++) {
        node_t kid = kids_of(c, n)[v];
        int seen = 0;
        for (int u = 0; u < v && !seen; u++) seen = kids_of(c, n)[u] == kid;
        if (seen) continue;
        PyObject *below = paths_big(c, kid, negated, memo);
        PyObject *sum = below ? PyNumber_Add(total, below) : NULL;
        Py_XDECREF(below);
        Py_DECREF(total);
        total = sum;
    }
    if (total && PyDict_SetItem(memo, key, total) < 0) Py_CLEAR(total);
    Py_DECREF(key);
    return total;
}

static int check_node(Core *c, long n, int terminals) {
    if (n < (terminals ? 0 : 2) || (size_t)n >= c->n) {
        PyErr_Format(PyExc_ValueError, "capmatrix: %ld is not a node of this store", n);
        return -1;
    }
    return 0;
}

static PyObject *Core_cells_below(Core *c, PyObject *arg) {
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (check_node(c, n, 0) < 0) return NULL;
    u128 v;
    int s = cells128(c, (node_t)n, &v);
    if (s < 0) return NULL;
    if (s == 0) return from_u128(v);
    PyObject *skip[c->width + 1];
    PyObject *memo = PyDict_New();
    int made = 0;
    PyObject *out = NULL;
    if (!memo) return NULL;
    PyObject *acc = PyLong_FromLong(1);
    for (int lv = c->width; acc && lv >= 0; lv--) {  /* skip[l]: cells of the levels l..last */
        skip[lv] = acc;
        made++;
        if (lv > 0) {
            PyObject *size = PyLong_FromLong(c->sizes[lv - 1]);
            acc = size ? PyNumber_Multiply(acc, size) : NULL;
            Py_XDECREF(size);
        }
    }
    if (made == c->width + 1) out = cells_big(c, (node_t)n, memo, skip);
    for (int lv = c->width; lv > c->width - made; lv--) Py_DECREF(skip[lv]);
    Py_DECREF(memo);
    return out;
}

static PyObject *Core_count_paths(Core *c, PyObject *args) {
    long n;
    int negated;
    if (!PyArg_ParseTuple(args, "lp:count_paths", &n, &negated)) return NULL;
    if (check_node(c, n, 1) < 0) return NULL;
    u128 v;
    int s = paths128(c, (node_t)n, negated, &v);
    if (s < 0) return NULL;
    if (s == 0) return from_u128(v);
    PyObject *memo = PyDict_New();
    if (!memo) return NULL;
    PyObject *out = paths_big(c, (node_t)n, negated, memo);
    Py_DECREF(memo);
    return out;
}

/* ---------------------------------------------------------------------------------------------- */
/* The canonical boxes: paths to the inside terminal, masks grouped by child in first-seen order. */

typedef struct {
    node_t inside, outside;
    Py_ssize_t limit;
    PyObject *out, **masks, **full;   /* masks: per level, the mask of the current path */
    node_t *group_kid;                /* per level scratch (offsets: start) */
    uint64_t *group_mask;             /* per level scratch: size words per group (values < 64 * size) */
    int *mask_words;                  /* per level words in a mask */
    int64_t *group_start;
} Listing;

static PyObject *mask_to_int(const uint64_t *words, int W) {
    if (W == 1) return PyLong_FromUnsignedLongLong(words[0]);
    PyObject *out = PyLong_FromLong(0), *shift = PyLong_FromLong(64);
    if (!shift) Py_CLEAR(out);
    for (int w = W - 1; out && shift && w >= 0; w--) {
        PyObject *up = PyNumber_Lshift(out, shift);
        PyObject *word = up ? PyLong_FromUnsignedLongLong(words[w]) : NULL;
        PyObject *next = word ? PyNumber_Or(up, word) : NULL;
        Py_XDECREF(up);
        Py_XDECREF(word);
        Py_DECREF(out);
        out = next;
    }
    Py_XDECREF(shift);
    return out;
}

/* 1: go on; 0: the limit is reached; -1: error. */
static int list_walk(Core *c, Listing *L, node_t n) {
    if (n == L->inside) {
        PyObject *box = PyTuple_New(c->width);
        if (!box) return -1;
        for (int lv = 0; lv < c->width; lv++) {
            Py_INCREF(L->masks[lv]);
            PyTuple_SET_ITEM(box, c->axes[lv], L->masks[lv]);
        }
        int bad = PyList_Append(L->out, box);
        Py_DECREF(box);
        if (bad) return -1;
        return L->limit < 0 || PyList_GET_SIZE(L->out) < L->limit;
    }
    int lv = c->rec[n].level, size = c->sizes[lv], W = L->mask_words[lv];
    node_t *gk = L->group_kid + c->start[lv];
    uint64_t *gm = L->group_mask + (size_t)L->group_start[lv];
    int groups = 0;
    for (int v = 0; v < size; v++) {
        node_t kid = kids_of(c, n)[v];
        if (kid == L->outside) continue;
        int g = 0;
        while (g < groups && gk[g] != kid) g++;
        if (g == groups) {
            gk[groups++] = kid;
            memset(gm + (size_t)g * W, 0, (size_t)W * 8);
        }
        gm[(size_t)g * W + v / 64] |= 1ULL << (v % 64);
    }
    int going = 1;
    PyObject *whole = L->masks[lv];
    for (int g = 0; g < groups && going == 1; g++) {
        PyObject *mask = mask_to_int(gm + (size_t)g * W, W);
        if (!mask) { going = -1; break; }
        L->masks[lv] = mask;
        going = list_walk(c, L, gk[g]);
        Py_DECREF(mask);
    }
    L->masks[lv] = whole;
    return going;
}

static PyObject *Core_boxes(Core *c, PyObject *args) {
    long n;
    Py_ssize_t limit;
    int negated;
    PyObject *full;
    if (!PyArg_ParseTuple(args, "lnpO:boxes", &n, &limit, &negated, &full)) return NULL;
    if (check_node(c, n, 1) < 0) return NULL;
    if (!PySequence_Check(full) || PySequence_Size(full) != c->width) {
        PyErr_SetString(PyExc_ValueError, "capmatrix: boxes needs the whole mask of every level");
        return NULL;
    }
    Listing L;
    memset(&L, 0, sizeof L);
    L.inside = negated ? EMPTY : FULL;
    L.outside = negated ? FULL : EMPTY;
    L.limit = limit;
    L.out = PyList_New(0);
    if (!L.out || n == L.outside || limit == 0) return L.out;
    int width = c->width;
    L.masks = PyMem_Calloc((size_t)width + 1, sizeof(PyObject *));
    L.group_kid = PyMem_Malloc(((size_t)c->start[width] + 1) * sizeof(node_t));
    L.mask_words = PyMem_Malloc(((size_t)width + 1) * sizeof(int));
    L.group_start = PyMem_Malloc(((size_t)width + 1) * sizeof(int64_t));
    int ok = L.masks && L.group_kid && L.mask_words && L.group_start;
    size_t words = 0;
    for (int lv = 0; ok && lv < width; lv++) {
        L.mask_words[lv] = (c->sizes[lv] + 63) / 64;
        L.group_start[lv] = (int64_t)words;
        words += (size_t)c->sizes[lv] * L.mask_words[lv];
    }
    if (ok) L.group_mask = PyMem_Malloc((words + 1) * 8);
    if (!ok || !L.group_mask) {
        PyErr_NoMemory();
        Py_CLEAR(L.out);
    }
    for (int lv = 0; L.out && lv < width; lv++) {
        L.masks[lv] = PySequence_GetItem(full, lv);
        if (!L.masks[lv]) Py_CLEAR(L.out);
    }
    if (L.out && list_walk(c, &L, (node_t)n) < 0) Py_CLEAR(L.out);
    if (L.masks) for (int lv = 0; lv < width; lv++) Py_XDECREF(L.masks[lv]);
    PyMem_Free(L.masks);
    PyMem_Free(L.group_kid);
    PyMem_Free(L.group_mask);
    PyMem_Free(L.mask_words);
    PyMem_Free(L.group_start);
    return L.out;
}

/* ---------------------------------------------------------------------------------------------- */
/* The Python type.                                                                                */

static void core_clear(Core *c) {
    cache_free(&c->or_m);
    cache_free(&c->and_m);
    cache_free(&c->minus_m);
    cache_free(&c->within_m);
    cache_free(&c->apart_m);
    memo_free(&c->cells_m);
    memo_free(&c->paths_m[0]);
    memo_free(&c->paths_m[1]);
    PyMem_Free(c->counts);
    c->counts = NULL;
    c->counts_n = c->counts_cap = 0;
    PyMem_Free(c->uniq);
    c->uniq = NULL;
    c->uniq_mask = c->uniq_used = 0;
    c->cache_cap = 0;
}

static void Core_dealloc(Core *c) {
    core_clear(c);
    PyMem_Free(c->sizes);
    PyMem_Free(c->axes);
    PyMem_Free(c->start);
    PyMem_Free(c->row_a);
    PyMem_Free(c->row_b);
    PyMem_Free(c->row_out);
    PyMem_Free(c->rec);
    PyMem_Free(c->pool);
    PyMem_Free(c->skip);
    PyMem_Free(c->skip_ok);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

static int Core_init(Core *c, PyObject *args, PyObject *kwds) {
    static char *names[] = {"sizes", "axes", NULL};
    PyObject *sizes, *axes;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO:Core", names, &sizes, &axes)) return -1;
    if (c->sizes) {  /* set first: a failed init is not retried over its buffers either */
        PyErr_SetString(PyExc_TypeError, "capmatrix: a core is initialised once");
        return -1;
    }
    Py_ssize_t width = PySequence_Size(sizes);
    if (width < 0) return -1;
    if (PySequence_Size(axes) != width || width > 4096) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "capmatrix: an axis per level (at most 4096)");
        return -1;
    }
    c->width = (int)width;
    c->sizes = PyMem_Malloc(((size_t)width + 1) * sizeof(int32_t));
    c->axes = PyMem_Malloc(((size_t)width + 1) * sizeof(int32_t));
    c->start = PyMem_Malloc(((size_t)width + 1) * sizeof(int64_t));
    c->skip = PyMem_Malloc(((size_t)width + 1) * sizeof(u128));
    c->skip_ok = PyMem_Malloc((size_t)width + 1);
    if (!c->sizes || !c->axes || !c->start || !c->skip || !c->skip_ok) { PyErr_NoMemory(); return -1; }
    int64_t total = 0;
    for (Py_ssize_t lv = 0; lv < width; lv++) {
        PyObject *s = PySequence_GetItem(sizes, lv), *a = PySequence_GetItem(axes, lv);
        long size = s ? PyLong_AsLong(s) : -1, axis = a ? PyLong_AsLong(a) : -1;
        Py_XDECREF(s);
        Py_XDECREF(a);
        if (PyErr_Occurred()) return -1;
        if (size < 1 || size > (1L << 20) || axis < 0 || axis >= width) {
            PyErr_SetString(PyExc_ValueError, "capmatrix: a level has 1 to 2**20 values and names an axis");
            return -1;
        }
        for (Py_ssize_t k = 0; k < lv; k++) {
            if (c->axes[k] == axis) {
                PyErr_SetString(PyExc_ValueError, "capmatrix: the levels name each axis once");
                return -1;
            }
        }
        c->sizes[lv] = (int32_t)size;
        c->axes[lv] = (int32_t)axis;
        c->start[lv] = total;
        total += size;
    }
    c->sizes[width] = 1;
    c->start[width] = total;
    c->skip[width] = 1;
    c->skip_ok[width] = 1;
    for (Py_ssize_t lv = width - 1; lv >= 0; lv--) {
        c->skip_ok[lv] = c->skip_ok[lv + 1]
            && !__builtin_mul_overflow(c->skip[lv + 1], (u128)c->sizes[lv], &c->skip[lv]);
        if (!c->skip_ok[lv]) c->skip[lv] = 0;
    }
    /* skip[l] / skip[m] must divide exactly for l <= m: both fit, or the count goes to Python ints */
    c->row_a = PyMem_Malloc(((size_t)total + 1) * sizeof(node_t));
    c->row_b = PyMem_Malloc(((size_t)total + 1) * sizeof(node_t));
    c->row_out = PyMem_Malloc(((size_t)total + 1) * sizeof(node_t));
    c->cap = 1024;
    c->rec = PyMem_Calloc(c->cap, sizeof(Rec));
    c->pool_cap = 4096;
    c->pool = PyMem_Malloc(c->pool_cap * sizeof(node_t));
    if (!c->row_a || !c->row_b || !c->row_out || !c->rec || !c->pool) {
        PyErr_NoMemory();
        return -1;
    }
    c->rec[0].level = c->rec[1].level = (int32_t)width;
    c->rec[0].off = c->rec[1].off = 0;
    c->n = 2;
    c->pool_n = 0;
    return 0;
}

static int ready(Core *c) {
    if (!c->rec) {
        PyErr_SetString(PyExc_TypeError, "capmatrix: the core was not initialised");
        return -1;
    }
    return 0;
}

static int two_nodes(Core *c, PyObject *args, const char *fmt, node_t *a, node_t *b) {
    long x, y;
    if (ready(c) < 0 || !PyArg_ParseTuple(args, fmt, &x, &y)) return -1;
    if (check_node(c, x, 1) < 0 || check_node(c, y, 1) < 0) return -1;
    if ((!c->or_m.slots || !c->and_m.slots || !c->minus_m.slots || !c->within_m.slots || !c->apart_m.slots)
        && caches_fit(c) < 0) return -1;  /* a failed first sizing may have left some unmade */
    *a = (node_t)x;
    *b = (node_t)y;
    return 0;
}

#define BUILD(NAME, FN)                                                          \
    static PyObject *Core_##NAME(Core *c, PyObject *args) {                      \
        node_t a, b;                                                             \
        if (two_nodes(c, args, "ll:" #NAME, &a, &b) < 0) return NULL;            \
        node_t r = FN(c, a, b);                                                  \
        return r < 0 ? NULL : PyLong_FromLong(r);                                \
    }
BUILD(join, join)
BUILD(meet, meet)
BUILD(minus, minus)

#define TEST(NAME, FN)                                                           \
    static PyObject *Core_##NAME(Core *c, PyObject *args) {                      \
        node_t a, b;                                                             \
        if (two_nodes(c, args, "ll:" #NAME, &a, &b) < 0) return NULL;            \
        int r = FN(c, a, b);                                                     \
        if (r < 0) return NULL;                                                  \
        return PyBool_FromLong(r);                                               \
    }
TEST(within, within)
TEST(intersects, intersects)

static PyObject *Core_node(Core *c, PyObject *args) {
    int lv;
    PyObject *kids;
    if (ready(c) < 0 || !PyArg_ParseTuple(args, "iO!:node", &lv, &PyTuple_Type, &kids)) return NULL;
    if (lv < 0 || lv >= c->width || PyTuple_GET_SIZE(kids) != c->sizes[lv]) {
        PyErr_SetString(PyExc_ValueError, "capmatrix: a node has a child per value of its level");
        return NULL;
    }
    node_t *row = c->row_out + c->start[lv];
    for (int v = 0; v < c->sizes[lv]; v++) {
        long k = PyLong_AsLong(PyTuple_GET_ITEM(kids, v));
        if (k == -1 && PyErr_Occurred()) return NULL;
        if (check_node(c, k, 1) < 0) return NULL;
        if (k >= 2 && c->rec[k].level <= lv) {
            PyErr_SetString(PyExc_ValueError, "capmatrix: a child tests a later level than its parent");
            return NULL;
        }
        row[v] = (node_t)k;
    }
    node_t r = make(c, lv, row);
    return r < 0 ? NULL : PyLong_FromLong(r);
}

static PyObject *Core_level(Core *c, PyObject *arg) {
    long n = PyLong_AsLong(arg);
    if (ready(c) < 0 || (n == -1 && PyErr_Occurred()) || check_node(c, n, 1) < 0) return NULL;
    return PyLong_FromLong(c->rec[n].level);
}

static PyObject *Core_kids(Core *c, PyObject *arg) {
    long n = PyLong_AsLong(arg);
    if (ready(c) < 0 || (n == -1 && PyErr_Occurred()) || check_node(c, n, 1) < 0) return NULL;
    if (n < 2) return PyTuple_New(0);
    int size = c->sizes[c->rec[n].level];
    PyObject *out = PyTuple_New(size);
    if (!out) return NULL;
    for (int v = 0; v < size; v++) {
        PyObject *k = PyLong_FromLong(kids_of(c, (node_t)n)[v]);
        if (!k) { Py_DECREF(out); return NULL; }
        PyTuple_SET_ITEM(out, v, k);
    }
    return out;
}

static PyObject *Core_release(Core *c, PyObject *Py_UNUSED(ignored)) {
    if (ready(c) < 0) return NULL;
    core_clear(c);
    /* the node records and children too, back to their first size: a store kept alive after its
     * analysis (by a caller's reference) holds kilobytes, not the hundreds of MB it grew to */
    Rec *rec = PyMem_Calloc(1024, sizeof(Rec));
    node_t *pool = PyMem_Malloc(4096 * sizeof(node_t));
    if (!rec || !pool) {  /* no room for the small ones: keep the large ones, emptied all the same */
        PyMem_Free(rec);
        PyMem_Free(pool);
    } else {
        PyMem_Free(c->rec);
        PyMem_Free(c->pool);
        c->rec = rec;
        c->cap = 1024;
        c->pool = pool;
        c->pool_cap = 4096;
    }
    c->rec[0].level = c->rec[1].level = (int32_t)c->width;
    c->rec[0].off = c->rec[1].off = 0;
    c->n = 2;
    c->pool_n = 0;
    Py_RETURN_NONE;
}

static Py_ssize_t Core_len(Core *c) { return c->rec ? (Py_ssize_t)c->n : 0; }

static PyMethodDef Core_methods[] = {
    {"node", (PyCFunction)Core_node, METH_VARARGS, "The node testing level with these children."},
    {"level", (PyCFunction)Core_level, METH_O, "The level a node tests (terminals: the width)."},
    {"kids", (PyCFunction)Core_kids, METH_O, "A node's children, one per value of its level."},
    {"join", (PyCFunction)Core_join, METH_VARARGS, "The union of two regions."},
    {"meet", (PyCFunction)Core_meet, METH_VARARGS, "The intersection of two regions."},
    {"minus", (PyCFunction)Core_minus, METH_VARARGS, "The cells of the first region not in the second."},
    {"within", (PyCFunction)Core_within, METH_VARARGS, "Whether every cell of the first is in the second."},
    {"intersects", (PyCFunction)Core_intersects, METH_VARARGS, "Whether two regions share a cell."},
    {"rules", (PyCFunction)Core_rules, METH_VARARGS, "The node of a kernel's grants less its exclusions."},
    {"cells_below", (PyCFunction)Core_cells_below, METH_O, "Cells of a node from its level down."},
    {"count_paths", (PyCFunction)Core_count_paths, METH_VARARGS, "Paths from a node to a terminal."},
    {"boxes", (PyCFunction)Core_boxes, METH_VARARGS, "The canonical boxes of a node, in axis order."},
    {"release", (PyCFunction)Core_release, METH_NOARGS, "Empty the store (its nodes are unusable after)."},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods Core_as_sequence = {.sq_length = (lenfunc)Core_len};

static PyTypeObject CoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "capmatrix.analysis._core.Core",
    .tp_doc = "Decision-diagram nodes over levels of sizes[l] values; level l tests axis axes[l].",
    .tp_basicsize = sizeof(Core),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Core_init,
    .tp_dealloc = (destructor)Core_dealloc,
    .tp_methods = Core_methods,
    .tp_as_sequence = &Core_as_sequence,
};

/* ---------------------------------------------------------------------------------------------- */
/* Merging a region's boxes: regions.Region.merged's merge and order, for masks of up to 64 bits.  */

typedef struct {
    uint64_t *rows;      /* n rows of `width` masks */
    Py_ssize_t n;
} Rows;

static uint64_t row_hash(const uint64_t *row, const int *axes, int k, int skip) {
    uint64_t h = 0x9e3779b97f4a7c15ULL;
    for (int j = 0; j < k; j++) {
        if (j == skip) continue;
        h = mix64(h ^ row[axes[j]]);
    }
    return h;
}

static int row_same(const uint64_t *a, const uint64_t *b, const int *axes, int k, int skip) {
    for (int j = 0; j < k; j++) {
        if (j != skip && a[axes[j]] != b[axes[j]]) return 0;
    }
    return 1;
}

/* One pass of the merge on varying axis `on` (skip -1: none, which removes repeated boxes): rows
 * equal on every other varying axis become one row, their masks on `on` or-ed. Writes `out` (room
 * for n rows) and returns its row count. */
static Py_ssize_t merge_pass(const Rows *in, uint64_t *out, int32_t *table, size_t mask, int width,
                             const int *axes, int k, int on) {
    memset(table, 0xff, (mask + 1) * sizeof(int32_t));
    Py_ssize_t m = 0;
    for (Py_ssize_t i = 0; i < in->n; i++) {
        const uint64_t *row = in->rows + (size_t)i * (size_t)width;
        size_t slot = (size_t)row_hash(row, axes, k, on) & mask;
        for (;;) {
            int32_t at = table[slot];
            if (at < 0) {
                table[slot] = (int32_t)m;
                memcpy(out + (size_t)m * (size_t)width, row, (size_t)width * sizeof(uint64_t));
                m++;
                break;
            }
            uint64_t *there = out + (size_t)at * (size_t)width;
            if (row_same(there, row, axes, k, on)) {
                if (on >= 0) there[axes[on]] |= row[axes[on]];
                break;
            }
            slot = (slot + 1) & mask;
        }
    }
    return m;
}

static int order_width;  /* qsort has no context argument: the width of the rows being sorted */

/* Region.merged's order: more values first on each axis in turn, then the smaller masks first. */
static int row_order(const void *pa, const void *pb) {
    const uint64_t *a = pa, *b = pb;
    for (int j = 0; j < order_width; j++) {
        int ca = __builtin_popcountll(a[j]), cb = __builtin_popcountll(b[j]);
        if (ca != cb) return ca > cb ? -1 : 1;
    }
    for (int j = 0; j < order_width; j++) {
        if (a[j] != b[j]) return a[j] < b[j] ? -1 : 1;
    }
    return 0;
}

/* merge(boxes) -> the merged boxes in Region.merged's order, or None where a mask does not fit in
 * 64 bits (the caller merges those in Python). The same passes as regions._merge: the varying
 * axes in turn, until as many passes in a row as there are varying axes merged nothing. */
static PyObject *core_merge(PyObject *Py_UNUSED(module), PyObject *arg) {
    PyObject *seq = PySequence_Fast(arg, "merge() takes a sequence of boxes");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    PyObject *result = NULL;
    uint64_t *a = NULL, *b = NULL;
    int32_t *table = NULL;
    int *axes = NULL;
    Py_ssize_t width = -1;
    int k = 0;
    size_t cap = 16;
    Rows rows;
    if (n == 0) {
        Py_DECREF(seq);
        return PyList_New(0);
    }
    if (n > INT32_MAX / 2) {  /* past the table's indexes: the caller merges them */
        result = Py_NewRef(Py_None);
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyTuple_Check(items[i])) {
            PyErr_Format(PyExc_TypeError, "merge(): box %zd is %.80s, not a tuple", i, Py_TYPE(items[i])->tp_name);
            goto done;
        }
        Py_ssize_t w = PyTuple_GET_SIZE(items[i]);
        if (width < 0) width = w;
        else if (w != width) {
            PyErr_Format(PyExc_ValueError, "merge(): box %zd has %zd masks, box 0 has %zd", i, w, width);
            goto done;
        }
    }
    if (width > 4096) {  /* as many axes as a core has levels at most; the caller merges more */
        result = Py_NewRef(Py_None);
        goto done;
    }
    a = PyMem_Malloc((size_t)n * (size_t)(width ? width : 1) * sizeof(uint64_t));
    b = PyMem_Malloc((size_t)n * (size_t)(width ? width : 1) * sizeof(uint64_t));
    axes = PyMem_Malloc((size_t)(width ? width : 1) * sizeof(int));
    while (cap < (size_t)n * 2) cap *= 2;
    table = PyMem_Malloc(cap * sizeof(int32_t));
    if (!a || !b || !axes || !table) { PyErr_NoMemory(); goto done; }
    /* Every box is read and checked; a box with an empty mask holds no cell and is dropped, as
     * Region drops it; `kept` rows are read. */
    Py_ssize_t kept = 0;
    int too_wide = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int empty = 0;
        for (Py_ssize_t j = 0; j < width; j++) {
            PyObject *v = PyTuple_GET_ITEM(items[i], j);
            if (!PyLong_Check(v)) {
                PyErr_Format(PyExc_TypeError, "merge(): mask %zd of box %zd is %.80s, not an int", j, i,
                             Py_TYPE(v)->tp_name);
                goto done;
            }
            int overflow = 0;
            long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
            if (x == -1 && PyErr_Occurred()) goto done;
            if (overflow > 0) {
                /* past 63 bits: a 64-bit mask still fits, wider ones are the caller's */
                unsigned long long u = PyLong_AsUnsignedLongLong(v);
                if (u == (unsigned long long)-1 && PyErr_Occurred()) {
                    PyErr_Clear();
                    too_wide = 1;  /* the caller merges these; the rest is still checked */
                    continue;
                }
                x = (long long)u;
            } else if (overflow < 0 || x < 0) {
                PyErr_Format(PyExc_ValueError, "merge(): mask %zd of box %zd is negative", j, i);
                goto done;
            }
            if (x == 0) empty = 1;
            a[(size_t)kept * (size_t)width + (size_t)j] = (uint64_t)x;
        }
        if (!empty) kept++;
    }
    if (too_wide) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    n = kept;
    if (n == 0) {
        result = PyList_New(0);
        goto done;
    }
    for (Py_ssize_t j = 0; j < width; j++) {
        for (Py_ssize_t i = 1; i < n; i++) {
            if (a[(size_t)i * (size_t)width + (size_t)j] != a[(size_t)j]) { axes[k++] = (int)j; break; }
        }
    }
    rows.rows = a;
    rows.n = n;
    /* the set of boxes first: a box given twice is one box */
    rows.n = merge_pass(&rows, b, table, cap - 1, (int)width, axes, k, -1);
    { uint64_t *t = a; a = b; b = t; rows.rows = a; }
    if (rows.n > 1 && k > 0) {
        int still = 0, on = 0;
        while (still < k) {
            Py_ssize_t m = merge_pass(&rows, b, table, cap - 1, (int)width, axes, k, on);
            if (m < rows.n) {
                uint64_t *t = a; a = b; b = t;
                rows.rows = a;
                rows.n = m;
                still = 1;
            } else {
                still++;
            }
            on = (on + 1) % k;
        }
    }
    order_width = (int)width;
    qsort(a, (size_t)rows.n, (size_t)width * sizeof(uint64_t), row_order);
    PyObject *out = PyList_New(rows.n);
    if (!out) goto done;
    for (Py_ssize_t i = 0; i < rows.n; i++) {
        PyObject *box = PyTuple_New(width);
        if (!box) { Py_DECREF(out); goto done; }
        PyList_SET_ITEM(out, i, box);
        for (Py_ssize_t j = 0; j < width; j++) {
            PyObject *v = PyLong_FromUnsignedLongLong(a[(size_t)i * (size_t)width + (size_t)j]);
            if (!v) { Py_DECREF(out); goto done; }
            PyTuple_SET_ITEM(box, j, v);
        }
    }
    result = out;
done:
    PyMem_Free(a);
    PyMem_Free(b);
    PyMem_Free(axes);
    PyMem_Free(table);
    Py_DECREF(seq);
    return result;
}

static PyMethodDef module_methods[] = {
    {"merge", (PyCFunction)core_merge, METH_O,
     "Region.merged's boxes: merged as regions._merge merges them, in its order (None past 64-bit masks)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_core",
    .m_doc = "The compiled decision-diagram core (see _pycore.py).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__core(void) {
    if (PyType_Ready(&CoreType) < 0) return NULL;
    PyObject *m = PyModule_Create(&core_module);
    if (!m) return NULL;
    if (PyModule_AddStringConstant(m, "SOURCE_SHA256", CORE_SOURCE_SHA256) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&CoreType);
    if (PyModule_AddObject(m, "Core", (PyObject *)&CoreType) < 0) {
        Py_DECREF(&CoreType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
