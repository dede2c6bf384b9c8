"""C helpers for the values the generated triggers compare: key bits, string order, LIKE, date parts.

Why apart from :mod:`.crt` (the maps): these are small pure functions of
values, each the C twin of a Python-side definition the backends must agree
on, and tested against it: ``str_cmp`` orders interned strings as Python
orders ``str`` (UTF-8 bytes compare as code points do), ``str_like`` is
:mod:`boreas.m3.like`, ``date_part`` is ``date.year`` / ``.month`` / ... / ``.isocalendar()[1]`` of
:mod:`boreas.m3.functions` over a day number (``date.toordinal()``), and
``f2k``/``k2f`` hold a FLOAT key column as the double's bits (``-0.0`` as
``0.0``, every NaN as the quiet NaN Python's ``float("nan")`` is, so equal
keys, and NaNs, which SQL's MIN/MAX and GROUP BY hold equal, have equal
bits: ..nanorder).  They read the runtime's intern
table (``rt->strs``), so :data:`VALUES` follows the type declarations in
:data:`.crt.SOURCE`.

>>> [f for f in ("f2k", "k2f", "str_cmp", "str_like", "date_part") if f" {f}(" not in VALUES]
[]
"""

VALUES = r"""
static inline int64_t f2k(double d) { int64_t k; if (d == 0.0) d = 0.0; if (d != d) return INT64_C(0x7FF8000000000000);
    memcpy(&k, &d, 8); return k; }
static inline double k2f(int64_t k) { double d; memcpy(&d, &k, 8); return d; }

/* Python's order of two interned strings: UTF-8 bytes compare as code points do */
static inline int str_cmp(const rt_t *rt, int64_t a, int64_t b) {
    if (a == b) return 0;
    const str_t *x = &rt->strs[a], *y = &rt->strs[b];
    int64_t n = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->p, y->p, n);
    return c ? c : (x->n > y->n) - (x->n < y->n);
}

/* SQL LIKE of interned string ``id`` against a constant pattern (UTF-8, ``pn`` bytes), as boreas.m3.like: '%' any
   sequence, '_' one code point, every other byte itself.  One pass with backtracking to the last '%' (the classic
   wildcard match); '%' resumes only at code point starts, so '_' always consumes a whole character. */
static inline int64_t cp_next(const unsigned char *s, int64_t i, int64_t n) {
    i++;
    while (i < n && (s[i] & 0xC0) == 0x80) i++;
    return i;
}
static inline int str_like(const rt_t *rt, int64_t id, const char *pattern, int64_t pn) {
    const unsigned char *s = (const unsigned char *)rt->strs[id].p, *p = (const unsigned char *)pattern;
    int64_t sn = rt->strs[id].n, i = 0, j = 0, star = -1, mark = 0;
    while (i < sn) {
        if (j < pn && p[j] == '%') { star = j++; mark = i; }
        else if (j < pn && p[j] == '_') { i = cp_next(s, i, sn); j++; }
        else if (j < pn && p[j] == s[i]) { i++; j++; }
        else if (star >= 0) { j = star + 1; mark = cp_next(s, mark, sn); i = mark; }
        else return 0;
    }
    while (j < pn && p[j] == '%') j++;
    return j == pn;
}

/* EXTRACT(YEAR|QUARTER|MONTH|DAY) (part 0-3) of a DATE held as its day number (Python's date.toordinal(), 0001-01-01
   is 1): the proleptic Gregorian calendar's civil-from-days (H. Hinnant), days counted from 0000-03-01. */
/* date.toordinal() of January 1 of year y (y >= 1): the days of the years before it */
static inline int64_t jan1(int64_t y) { int64_t p = y - 1; return 365 * p + p / 4 - p / 100 + p / 400 + 1; }
static inline int64_t isodow(int64_t ordinal) { int64_t r = (ordinal - 1) % 7; return (r < 0 ? r + 7 : r) + 1; }
/* ISO weeks in year y: 53 when January 1 is a Thursday, or a Wednesday in a leap year */
static inline int64_t iso_weeks(int64_t y) {
    int64_t w = isodow(jan1(y)), leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return w == 4 || (leap && w == 3) ? 53 : 52;
}
static inline int64_t date_part(int64_t ordinal, int part) {
    int64_t z = ordinal + 305, era = (z >= 0 ? z : z - 146096) / 146097, doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365, doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153, d = doy - (153 * mp + 2) / 5 + 1, m = mp < 10 ? mp + 3 : mp - 9;
    int64_t y = yoe + era * 400 + (m <= 2);
    if (part <= 3) return part == 0 ? y : part == 1 ? (m - 1) / 3 + 1 : part == 2 ? m : d;
    int64_t wd = isodow(ordinal), yd = ordinal - jan1(y) + 1;
    if (part == 4) return wd % 7;   /* DOW: 0 is Sunday */
    if (part == 5) return wd;       /* ISODOW: 1 is Monday */
    if (part == 6) return yd;       /* DOY */
    int64_t w = (yd - wd + 10) / 7; /* WEEK (ISO 8601) */
    return w < 1 ? iso_weeks(y - 1) : w > iso_weeks(y) ? 1 : w;
}
"""
