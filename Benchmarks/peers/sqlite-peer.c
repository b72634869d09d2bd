/*
 * sqlite-peer: the physical SQLite peer of the command-line benchmarks.
 *
 *   sqlite-peer insert DATABASE EVENTS.jsonl   a new database holding every line of the file
 *   sqlite-peer scan DATABASE                  every body, in position order
 *
 * What the ledger's command-line figures are compared with: SQLite called from C, with nothing
 * between the program and the library. The Swift peer (Workloads/SQLitePeer.swift, through
 * GRDB) runs the same workload in Swift; this one shows what SQLite itself costs, so that a
 * ratio to it is a ratio to the storage engine rather than to a wrapper.
 *
 * The same table, indexes and durability as the Swift peer: WAL, `synchronous = FULL` (every
 * commit durable, as the ledger's), position as the integer primary key, a unique event id
 * (idempotency) and account + position (history). `insert` reads the JSON Lines file
 * `ledger import` reads (command-line-bench's generated events) and inserts each line as a row
 * with one prepared statement, 1,000 rows per transaction: id and account taken from the line,
 * the line's bytes as the body. `scan` reads every body in position order, adding up its bytes
 * so that each is really read, as `ledger replay` reads every event.
 *
 * command-line-bench times each run as a whole process (wall clock and peak memory), as it
 * times the `ledger` binary; the line printed at the end is for running it by hand.
 *
 * The line is parsed no further than it needs to be: the first "id" and "account" members,
 * which must be plain strings (no escapes; the generated events have none).
 *
 *   cc -O2 -o sqlite-peer sqlite-peer.c -lsqlite3      (tools/bench does this)
 */
#define _GNU_SOURCE /* memmem, getline */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { ROWS_PER_TRANSACTION = 1000 };

static const char *const schema =
    "CREATE TABLE events ("
    " position INTEGER PRIMARY KEY,"
    " id TEXT NOT NULL UNIQUE,"
    " account TEXT NOT NULL,"
    " body BLOB NOT NULL);"
    "CREATE INDEX events_by_account ON events(account, position);";

static _Noreturn void fail(const char *what, const char *why) {
    fprintf(stderr, "sqlite-peer: %s: %s\n", what, why);
    exit(1);
}

/* Fails unless SQLite answered `expected`, naming what was attempted and SQLite's message. */
static void check(sqlite3 *db, int result, int expected, const char *what) {
    if (result != expected) fail(what, db ? sqlite3_errmsg(db) : sqlite3_errstr(result));
}

static double seconds_now(void) {
    struct timespec now;
    if (clock_gettime(CLOCK_MONOTONIC, &now) != 0) fail("clock_gettime", strerror(errno));
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

static sqlite3 *open_database(const char *path, int flags) {
    sqlite3 *db = NULL;
    int result = sqlite3_open_v2(path, &db, flags, NULL);
    if (result != SQLITE_OK) {
        const char *why = db ? sqlite3_errmsg(db) : sqlite3_errstr(result);
        fprintf(stderr, "sqlite-peer: cannot open %s: %s\n", path, why);
        exit(1);
    }
    sqlite3_extended_result_codes(db, 1);
    return db;
}

static void close_database(sqlite3 *db) {
    check(db, sqlite3_close(db), SQLITE_OK, "close");
}

/* Runs a statement that returns no rows, or whose rows don't matter. */
static void execute(sqlite3 *db, const char *sql) {
    check(db, sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK, sql);
}

/* Steps a prepared statement that returns no rows, ready to run again. */
static void run(sqlite3 *db, sqlite3_stmt *statement, const char *what) {
    check(db, sqlite3_step(statement), SQLITE_DONE, what);
    check(db, sqlite3_reset(statement), SQLITE_OK, what);
}

/*
 * Finds the string value of the first member named `key` in a JSON line: `"key"`, optional
 * spaces, `:`, optional spaces, then a string without escapes. Returns 0 when there is none.
 */
static int string_member(const char *line, size_t length, const char *key,
                         const char **value, size_t *value_length) {
    char quoted[64];
    int quoted_length = snprintf(quoted, sizeof quoted, "\"%s\"", key);
    if (quoted_length < 0 || (size_t)quoted_length >= sizeof quoted) return 0;
    const char *end = line + length;
    const char *at = memmem(line, length, quoted, (size_t)quoted_length);
    if (!at) return 0;
    at += quoted_length;
    while (at < end && (*at == ' ' || *at == '\t')) at++;
    if (at == end || *at++ != ':') return 0;
    while (at < end && (*at == ' ' || *at == '\t')) at++;
    if (at == end || *at++ != '"') return 0;
    const char *start = at;
    while (at < end && *at != '"' && *at != '\\') at++;
    if (at == end || *at != '"') return 0;
    *value = start;
    *value_length = (size_t)(at - start);
    return 1;
}

static int insert(const char *database_path, const char *events_path) {
    /* A new database: positions start at 1, as the ledger's do. */
    if (access(database_path, F_OK) == 0) fail(database_path, "exists (insert writes a new database)");
    FILE *events = fopen(events_path, "r");
    if (!events) fail(events_path, strerror(errno));

    double start = seconds_now();
    sqlite3 *db = open_database(database_path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    sqlite3_stmt *mode = NULL;
    check(db, sqlite3_prepare_v2(db, "PRAGMA journal_mode = WAL", -1, &mode, NULL), SQLITE_OK, "PRAGMA journal_mode");
    check(db, sqlite3_step(mode), SQLITE_ROW, "PRAGMA journal_mode");
    const unsigned char *journal = sqlite3_column_text(mode, 0);
    if (!journal || strcmp((const char *)journal, "wal") != 0) fail("PRAGMA journal_mode = WAL", "not in WAL mode");
    check(db, sqlite3_finalize(mode), SQLITE_OK, "PRAGMA journal_mode");
    execute(db, "PRAGMA synchronous = FULL");
    execute(db, schema);

    sqlite3_stmt *begin = NULL, *commit = NULL, *insert_row = NULL;
    check(db, sqlite3_prepare_v2(db, "BEGIN", -1, &begin, NULL), SQLITE_OK, "prepare BEGIN");
    check(db, sqlite3_prepare_v2(db, "COMMIT", -1, &commit, NULL), SQLITE_OK, "prepare COMMIT");
    check(db, sqlite3_prepare_v2(db, "INSERT INTO events (position, id, account, body) VALUES (?, ?, ?, ?)",
                                 -1, &insert_row, NULL),
          SQLITE_OK, "prepare INSERT");

    char *line = NULL;
    size_t capacity = 0;
    ssize_t read_length;
    sqlite3_int64 rows = 0;
    uint64_t bytes = 0;
    while ((read_length = getline(&line, &capacity, events)) >= 0) {
        size_t length = (size_t)read_length;
        if (length > 0 && line[length - 1] == '\n') length--;
        if (length > INT_MAX) fail(events_path, "a line longer than SQLite binds");
        const char *id, *account;
        size_t id_length, account_length;
        if (!string_member(line, length, "id", &id, &id_length) ||
            !string_member(line, length, "account", &account, &account_length)) {
            fprintf(stderr, "sqlite-peer: %s, line %lld: no plain \"id\" and \"account\" strings\n",
                    events_path, (long long)rows + 1);
            exit(1);
        }
        if (rows % ROWS_PER_TRANSACTION == 0) run(db, begin, "BEGIN");
        rows++;
        bytes += length;
        /* SQLITE_STATIC: the line outlives the step that reads it. */
        check(db, sqlite3_bind_int64(insert_row, 1, rows), SQLITE_OK, "bind position");
        check(db, sqlite3_bind_text(insert_row, 2, id, (int)id_length, SQLITE_STATIC), SQLITE_OK, "bind id");
        check(db, sqlite3_bind_text(insert_row, 3, account, (int)account_length, SQLITE_STATIC), SQLITE_OK, "bind account");
        check(db, sqlite3_bind_blob(insert_row, 4, line, (int)length, SQLITE_STATIC), SQLITE_OK, "bind body");
        run(db, insert_row, "INSERT");
        if (rows % ROWS_PER_TRANSACTION == 0) run(db, commit, "COMMIT");
    }
    if (ferror(events)) fail(events_path, strerror(errno));
    if (rows % ROWS_PER_TRANSACTION != 0) run(db, commit, "COMMIT");
    if (rows == 0) fail(events_path, "no events");
    free(line);
    fclose(events);

    check(db, sqlite3_finalize(begin), SQLITE_OK, "finalize BEGIN");
    check(db, sqlite3_finalize(commit), SQLITE_OK, "finalize COMMIT");
    check(db, sqlite3_finalize(insert_row), SQLITE_OK, "finalize INSERT");
    close_database(db);
    double seconds = seconds_now() - start;
    printf("{\"operation\":\"insert\",\"rows\":%lld,\"bytes\":%" PRIu64 ",\"rowsPerTransaction\":%d,"
           "\"seconds\":%.6f,\"rowsPerSecond\":%.0f}\n",
           (long long)rows, bytes, ROWS_PER_TRANSACTION, seconds, (double)rows / seconds);
    return fflush(stdout) == 0 ? 0 : 1;
}

static int scan(const char *database_path) {
    double start = seconds_now();
    /* Read-write without create: a missing database is an error, and a WAL database's reader
       may need to create its shared-memory file. */
    sqlite3 *db = open_database(database_path, SQLITE_OPEN_READWRITE);
    sqlite3_stmt *select = NULL;
    check(db, sqlite3_prepare_v2(db, "SELECT body FROM events ORDER BY position", -1, &select, NULL),
          SQLITE_OK, "prepare SELECT");
    sqlite3_int64 rows = 0;
    uint64_t bytes = 0, sum = 0;
    int result;
    while ((result = sqlite3_step(select)) == SQLITE_ROW) {
        const unsigned char *body = sqlite3_column_blob(select, 0);
        int length = sqlite3_column_bytes(select, 0);
        if (length > 0 && !body) fail("SELECT", sqlite3_errmsg(db));
        for (int index = 0; index < length; index++) sum += body[index];
        bytes += (uint64_t)length;
        rows++;
    }
    check(db, result, SQLITE_DONE, "SELECT");
    check(db, sqlite3_finalize(select), SQLITE_OK, "finalize SELECT");
    close_database(db);
    if (rows == 0) fail(database_path, "no rows");
    double seconds = seconds_now() - start;
    printf("{\"operation\":\"scan\",\"rows\":%lld,\"bytes\":%" PRIu64 ",\"byteSum\":%" PRIu64 ","
           "\"seconds\":%.6f,\"rowsPerSecond\":%.0f}\n",
           (long long)rows, bytes, sum, seconds, (double)rows / seconds);
    return fflush(stdout) == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "insert") == 0) return insert(argv[2], argv[3]);
    if (argc == 3 && strcmp(argv[1], "scan") == 0) return scan(argv[2]);
    fprintf(stderr, "usage: sqlite-peer insert DATABASE EVENTS.jsonl\n"
                    "       sqlite-peer scan DATABASE\n");
    return 64;
}
