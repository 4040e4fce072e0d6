/* The least a row-returning SQLite reader can cost: step through a query and copy every
 * column of every row as int64 into memory, in C (no Arrow, no Python). Compared with the
 * floor of bench_analyze.py (one aggregate per table), it shows what returning rows costs
 * SQLite itself (issue 19: the 2 M benchmark's ratio is bounded by it).
 *
 *   gcc -O2 bench/row_loop.c -lsqlite3 -o /tmp/row_loop
 *   /tmp/row_loop /tmp/bench/ops2m.sqlite "SELECT start, end, ... FROM CUPTI_ACTIVITY_KIND_KERNEL"
 *
 * Prints the rows, the columns and the seconds of the loop (monotonic clock). Opens the export
 * read-only; writes nothing.
 */
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s EXPORT QUERY\n", argv[0]);
        return 2;
    }
    sqlite3 *db;
    if (sqlite3_open_v2(argv[1], &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        fprintf(stderr, "cannot open %s: %s\n", argv[1], sqlite3_errmsg(db));
        return 2;
    }
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, argv[2], -1, &st, NULL) != SQLITE_OK) {
        fprintf(stderr, "bad query: %s\n", sqlite3_errmsg(db));
        return 2;
    }
    int ncols = sqlite3_column_count(st);
    size_t cap = 1 << 16, rows = 0;
    int64_t *out = malloc(cap * ncols * sizeof *out);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (rows == cap) {
            cap *= 2;
            out = realloc(out, cap * ncols * sizeof *out);
        }
        for (int i = 0; i < ncols; i++) out[rows * ncols + i] = sqlite3_column_int64(st, i);
        rows++;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%zu rows %d columns %.3f s\n", rows, ncols,
           (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9);
    sqlite3_finalize(st);
    sqlite3_close(db);
    free(out);
    return 0;
}
