/* The usual case of specscope.analysis.pagescan's leaf decoding, one C loop per cell.

   decode_leaves() decodes the cells of a run of table leaf pages the way
   TableScan._decode does in numpy (its reference: tests/analysis/test_pagescan_native.py
   compares the two), but only where every cell is in the usual case: a leaf page (0x0d) whose
   cells are all inside its content area, in descending address order, none over another,
   each record in the page (no overflow), its header a one-byte size over `width` and one-byte
   serial types, no reserved type, and every wanted column that is not only asked whether it
   is NULL an integer (or NULL, or the constants 0 and 1). Anything else returns -1 before a
   row is trusted, and the caller decodes the chunk in numpy, which reads it or refuses it
   exactly as before. (https://www.sqlite.org/fileformat2.html, "B-tree Pages", "Record
   Format".)

   Built by specscope.analysis.native with the system's C compiler; no Python API is used (the
   caller passes numpy buffers through ctypes, which lets go of the GIL during the call). */

#include <stdint.h>

#define LEAF 0x0d

/* bytes of an integer by serial type (0 NULL, 8 and 9 the constants 0 and 1, 7 a float) */
static const int INT_BYTES[12] = {0, 1, 2, 3, 4, 6, 8, 8, 0, 0, 0, 0};

static inline uint64_t be(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = (v << 8) | p[i];
    return v;
}

/* The SQLite varint at p (at most 9 bytes, the ninth giving all 8 bits); its length. */
static inline int varint(const uint8_t *p, uint64_t *out) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) {
        v = (v << 7) | (p[i] & 0x7f);
        if (!(p[i] & 0x80)) {
            *out = v;
            return i + 1;
        }
    }
    *out = (v << 8) | p[8];
    return 9;
}

/* A big-endian two's complement integer of serial type t (1-6), sign-extended. */
static inline int64_t integer(const uint8_t *p, int t) {
    int n = INT_BYTES[t];
    uint64_t v = be(p, n);
    int shift = 64 - 8 * n;
    return shift ? (int64_t)(v << shift) >> shift : (int64_t)v;
}

/* Decode the cells of the leaf pages whose headers start at hdr[0..npages) in buf (the pages
   one after the other, page_size bytes each, padded with at least 16 zero bytes; page 1's
   header after the 100-byte file header). For each wanted column j (record index
   positions[j]): values[j * cap + row] (0 for NULL; nothing where present[j], a column asked
   only whether it is NULL) and nulls[j * cap + row] (1 where NULL); null_counts[j]; with
   rowids non-NULL, each row's rowid. cap: the cells of these pages in all. Returns the rows
   decoded, or -1 where anything is outside the usual case (nothing written is to be used). */
int64_t decode_leaves(const uint8_t *buf, const int64_t *hdr, int64_t npages, int64_t page_size,
                      int64_t usable, int64_t width, int64_t ncols, const int64_t *positions,
                      const uint8_t *present, int64_t cap, int64_t *values, uint8_t *nulls,
                      int64_t *null_counts, int64_t *rowids) {
    int64_t row = 0;
    int64_t wanted_at[127]; /* where each of the first `width` values starts */
    if (width > 126) return -1; /* (a one-byte header holds at most 126 types) */
    for (int64_t j = 0; j < ncols; j++) null_counts[j] = 0;
    for (int64_t p = 0; p < npages; p++) {
        int64_t h = hdr[p];
        int64_t page_start = h - h % page_size;
        if (buf[h] != LEAF) return -1;
        int64_t count = (int64_t)be(buf + h + 3, 2);
        int64_t content = h + 8 + 2 * count; /* cells start at or after the pointer array */
        if (h % page_size + 8 + 2 * count > usable) return -1;
        if (row + count > cap) return -1;
        int64_t above = page_start + usable; /* the previous cell's start (descending) */
        for (int64_t i = 0; i < count; i++, row++) {
            int64_t cell = page_start + (int64_t)be(buf + h + 8 + 2 * i, 2);
            if (cell - page_start < 8 || cell - page_start + 4 > usable) return -1;
            if (cell < content || cell >= above) return -1;
            uint64_t payload, rowid;
            int n1 = varint(buf + cell, &payload);
            int n2 = varint(buf + cell + n1, &rowid);
            if (payload > (uint64_t)(usable - 35)) return -1; /* on overflow pages */
            int64_t record = cell + n1 + n2;
            int64_t end = record + (int64_t)payload;
            if (end - page_start > usable || end > above) return -1;
            above = cell;
            int header = buf[record];
            if (header >= 0x80 || header <= width) return -1;
            const uint8_t *types = buf + record + 1;
            int64_t offset = record + header;
            for (int64_t k = 0; k < width; k++) {
                int t = types[k];
                if (t >= 0x80 || t == 10 || t == 11) return -1;
                wanted_at[k] = offset;
                offset += t < 12 ? INT_BYTES[t] : (t - 12) >> 1;
            }
            if (offset > end) return -1;
            for (int64_t j = 0; j < ncols; j++) {
                int64_t k = positions[j];
                int t = types[k];
                nulls[j * cap + row] = t == 0;
                null_counts[j] += t == 0;
                if (present[j]) continue;
                if (t > 9 || t == 7) return -1;
                values[j * cap + row] =
                    t == 0 || t == 8 ? 0 : t == 9 ? 1 : integer(buf + wanted_at[k], t);
            }
            if (rowids) rowids[row] = (int64_t)rowid;
        }
    }
    return row;
}
