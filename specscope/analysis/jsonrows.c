/* The per-step rows of an analysis as JSON records: the text pandas writes for
   frame.reset_index().to_json(orient="records") (specscope.analysis.jsonrows, the caller, keeps
   that call as the reference and compares the two in tests/analysis/test_jsonrows.py).

   One row is {KEY VALUE,KEY VALUE,...}, where each KEY is the column's name already written as
   JSON with its colon ("step":) and each VALUE is written so:

     int64    decimal digits, a minus sign before them where negative
     bool     true or false (a byte, 0 or not)
     text     a string column, as an int64 code per row into the column's texts (each already
              written as JSON, quotes and escapes, by the caller); null where the code is -1
     float64  null where NaN or infinite; else fixed-point with at most 10 decimals:
              the whole part, '.', the 10 decimals rounded (above half up; exactly half up
              where the last kept digit is odd or the decimals are 0), trailing zeros dropped
              but one ("3.0", "0.1234567891"); a carry out of the decimals goes to the whole
              part. Magnitudes above 1e16 - 1 (as a double: 1e16) or below 1e-15 but not 0 are
              written by pandas in exponent form ("%.10g"): for those the function returns -1
              and the caller lets pandas write that piece.

   Built by specscope.analysis.native (no Python API: the call lets go of the GIL, so two
   threads write two pieces at once). The decimals (x - whole) * 1e10 are rounded to a double
   once (kept in a volatile), then compared with their truncation, as pandas does: a compiler
   may not fuse the multiply with that subtraction (a fused multiply-add rounds once less), on
   any machine and with any flags. */

#include <math.h>
#include <stdint.h>
#include <string.h>

enum { INT64 = 0, FLOAT64 = 1, BOOL = 2, TEXT = 3 };

static char *put_u64(char *p, uint64_t v) {
    char digits[20];
    int n = 0;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n) *p++ = digits[--n];
    return p;
}

static char *put_i64(char *p, int64_t v) {
    if (v < 0) {
        *p++ = '-';
        return put_u64(p, (uint64_t)0 - (uint64_t)v);
    }
    return put_u64(p, (uint64_t)v);
}

/* NULL where the value needs the exponent form (see the file's head). */
static char *put_f64(char *p, double v) {
    if (isnan(v) || isinf(v)) {
        memcpy(p, "null", 4);
        return p + 4;
    }
    int negative = v < 0;
    if (negative) v = -v;
    if (v > 1e16 - 1 || (v != 0.0 && v < 1e-15)) return NULL;
    uint64_t whole = (uint64_t)v;
    volatile double scaled = (v - (double)whole) * 1e10;
    uint64_t decimals = (uint64_t)scaled;
    double rest = scaled - (double)decimals;
    if (rest > 0.5 || (rest == 0.5 && (decimals == 0 || (decimals & 1)))) decimals++;
    if (decimals >= 10000000000ULL) {
        decimals = 0;
        whole++;
    }
    if (negative) *p++ = '-';
    p = put_u64(p, whole);
    *p++ = '.';
    if (!decimals) {
        *p++ = '0';
        return p;
    }
    char digits[10];
    for (int i = 9; i >= 0; i--) {
        digits[i] = (char)('0' + decimals % 10);
        decimals /= 10;
    }
    int n = 10;
    while (digits[n - 1] == '0') n--;
    memcpy(p, digits, (size_t)n);
    return p + n;
}

/* Rows lo..hi-1 of ncols columns (columns[c]: the address of column c's first value, of the
   kind kinds[c]; keys: the columns' keys one after another, key c ending at key_ends[c]; a
   text column's texts one after another at texts[c], text i ending at text_ends[c][i]) as
   records separated by commas, without brackets, into out (cap bytes). row_most: the most
   bytes a row takes (the caller adds up each key and its value's longest text, and a comma
   each). Returns the bytes written; -1 where a value needs the exponent form; -2 where out
   is too small for the rows (the caller gives row_most per row: never). */
int64_t json_records(int64_t lo, int64_t hi, int64_t ncols, const int64_t *columns,
                     const uint8_t *kinds, const char *keys, const int64_t *key_ends,
                     const int64_t *texts, const int64_t *text_ends, int64_t row_most,
                     char *out, int64_t cap) {
    char *p = out;
    const char *end = out + cap;
    for (int64_t r = lo; r < hi; r++) {
        if (end - p < row_most) return -2;
        if (r > lo) *p++ = ',';
        *p++ = '{';
        int64_t key_start = 0;
        for (int64_t c = 0; c < ncols; c++) {
            if (c) *p++ = ',';
            memcpy(p, keys + key_start, (size_t)(key_ends[c] - key_start));
            p += key_ends[c] - key_start;
            key_start = key_ends[c];
            const void *column = (const void *)(intptr_t)columns[c];
            switch (kinds[c]) {
            case INT64:
                p = put_i64(p, ((const int64_t *)column)[r]);
                break;
            case FLOAT64:
                p = put_f64(p, ((const double *)column)[r]);
                if (!p) return -1;
                break;
            case BOOL:
                if (((const uint8_t *)column)[r]) {
                    memcpy(p, "true", 4);
                    p += 4;
                } else {
                    memcpy(p, "false", 5);
                    p += 5;
                }
                break;
            default: {
                int64_t code = ((const int64_t *)column)[r];
                if (code < 0) {
                    memcpy(p, "null", 4);
                    p += 4;
                    break;
                }
                const int64_t *ends = (const int64_t *)(intptr_t)text_ends[c];
                int64_t start = code ? ends[code - 1] : 0;
                memcpy(p, (const char *)(intptr_t)texts[c] + start, (size_t)(ends[code] - start));
                p += ends[code] - start;
            }
            }
        }
        *p++ = '}';
    }
    return p - out;
}
