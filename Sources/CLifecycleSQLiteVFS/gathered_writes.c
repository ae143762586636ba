/* A VFS that is SQLite's default one (unix) except that writes to a WAL and to a database file
 * are gathered.
 *
 * Why: SQLite writes each WAL frame with two pwrite(2) calls, the frame's 24-byte header and
 * then its page, and a checkpoint copies frames into the database one page a call. With
 * lifecycled's 1 KiB pages a batch of 1,000 items is a few thousand frames, and perf put those
 * calls at a third of the writer thread's time (Benchmarks/RESULTS.md, Batch ingest). Here
 * writes that follow each other in a file are copied into one 64 KiB buffer per open file and
 * written out in one call (a checkpoint's pages are mostly in runs: 7,227 writes were 255 runs).
 *
 * Invariants, which are what make the buffer invisible to SQLite and to a crash:
 *  - A transaction's commit is in the file before the write of its last frame returns. SQLite
 *    marks the frame that commits a transaction by a non-zero "database size after commit" in
 *    its header (https://sqlite.org/fileformat2.html#walformat). Such a header is written out
 *    at once, with everything buffered before it, and so is the write that follows it (the
 *    frame's page). So sqlite3_step returns only once the commit is in the file, or fails
 *    with that write's own error (SQLITE_FULL on a full disk): nothing acknowledged waits in
 *    memory, and a kill -9 loses only frames of a transaction that never committed.
 *  - Readers see only what is in the file. Another connection learns of frames from the
 *    wal-index, which SQLite updates only after the commit frame's write has returned (above).
 *    Frames of a transaction still open (a page-cache spill) may wait in the buffer; nothing
 *    reads them but their own connection, and its reads of the WAL write the buffer out first.
 *  - In WAL mode only a checkpoint writes the database file, and it syncs the file before it
 *    records in the wal-index what it copied; readers until then read those pages from the WAL.
 *    The sync writes the buffer out first, and so does any use of the wal-index's locks.
 *  - The file is as SQLite wrote it whenever SQLite looks: a read, sync, truncate, size,
 *    file control, lock, memory map or close writes the buffer out first, and so does a write
 *    that does not follow the buffered bytes (a frame rewritten in place, the WAL's header
 *    when it starts over, the next run of a checkpoint's pages).
 * Journals, temporary files and everything else go straight to the default VFS.
 */
#include "CLifecycleSQLiteVFS.h"

#include <sqlite3.h>
#include <stddef.h>
#include <string.h>

enum { BUFFER_SIZE = 64 * 1024, FRAME_HEADER_SIZE = 24 };

typedef struct GatheredFile {
    sqlite3_file base;
    /* The default VFS's file, in the same allocation, after this struct. */
    sqlite3_file *real;
    /* NULL for a file that is neither a WAL nor a database: its writes go straight through. */
    unsigned char *buffer;
    int isWAL;
    /* Where buffer[0] belongs in the file, and how many bytes wait. */
    sqlite3_int64 start;
    int used;
    /* The last write was a commit frame's header: its page is written out at once too. */
    int writeNextAtOnce;
} GatheredFile;

static sqlite3_vfs *defaultVFS;

static int writeOut(GatheredFile *file) {
    if (file->used == 0) return SQLITE_OK;
    int code = file->real->pMethods->xWrite(file->real, file->buffer, file->used, file->start);
    /* Dropped on failure too: SQLite rolls the transaction back and rewrites from its pages. */
    file->used = 0;
    return code;
}

static int gatheredClose(sqlite3_file *base) {
    GatheredFile *file = (GatheredFile *)base;
    int written = writeOut(file);
    int closed = file->real->pMethods->xClose(file->real);
    sqlite3_free(file->buffer);
    file->buffer = NULL;
    return written != SQLITE_OK ? written : closed;
}

static int gatheredRead(sqlite3_file *base, void *data, int amount, sqlite3_int64 offset) {
    GatheredFile *file = (GatheredFile *)base;
    int code = writeOut(file);
    if (code != SQLITE_OK) return code;
    return file->real->pMethods->xRead(file->real, data, amount, offset);
}

static int gatheredWrite(sqlite3_file *base, const void *data, int amount, sqlite3_int64 offset) {
    GatheredFile *file = (GatheredFile *)base;
    if (file->buffer == NULL) return file->real->pMethods->xWrite(file->real, data, amount, offset);
    if (file->used > 0 && (offset != file->start + file->used || amount > BUFFER_SIZE - file->used)) {
        int code = writeOut(file);
        if (code != SQLITE_OK) return code;
    }
    if (amount > BUFFER_SIZE) return file->real->pMethods->xWrite(file->real, data, amount, offset);
    if (file->used == 0) file->start = offset;
    memcpy(file->buffer + file->used, data, (size_t)amount);
    file->used += amount;
    const unsigned char *bytes = data;
    int isCommitHeader = file->isWAL && amount == FRAME_HEADER_SIZE && (bytes[4] | bytes[5] | bytes[6] | bytes[7]) != 0;
    if (isCommitHeader || file->writeNextAtOnce) {
        /* The header alone too, for a header rewritten with no page after it (SQLite rewrites
           headers to fix checksums after a frame was overwritten in the transaction). */
        file->writeNextAtOnce = isCommitHeader;
        return writeOut(file);
    }
    return SQLITE_OK;
}

static int gatheredTruncate(sqlite3_file *base, sqlite3_int64 size) {
    GatheredFile *file = (GatheredFile *)base;
    int code = writeOut(file);
    if (code != SQLITE_OK) return code;
    return file->real->pMethods->xTruncate(file->real, size);
}

static int gatheredSync(sqlite3_file *base, int flags) {
    GatheredFile *file = (GatheredFile *)base;
    int code = writeOut(file);
    if (code != SQLITE_OK) return code;
    return file->real->pMethods->xSync(file->real, flags);
}

static int gatheredFileSize(sqlite3_file *base, sqlite3_int64 *size) {
    GatheredFile *file = (GatheredFile *)base;
    int code = writeOut(file);
    if (code != SQLITE_OK) return code;
    return file->real->pMethods->xFileSize(file->real, size);
}

static int gatheredLock(sqlite3_file *base, int level) {
    GatheredFile *file = (GatheredFile *)base;
    int code = writeOut(file);
    if (code != SQLITE_OK) return code;
    return file->real->pMethods->xLock(file->real, level);
}

static int gatheredUnlock(sqlite3_file *base, int level) {
    GatheredFile *file = (GatheredFile *)base;
    int code = writeOut(file);
    if (code != SQLITE_OK) return code;
    return file->real->pMethods->xUnlock(file->real, level);
}

static int gatheredCheckReservedLock(sqlite3_file *base, int *result) {
    GatheredFile *file = (GatheredFile *)base;
    return file->real->pMethods->xCheckReservedLock(file->real, result);
}

static int gatheredFileControl(sqlite3_file *base, int operation, void *argument) {
    GatheredFile *file = (GatheredFile *)base;
    int code = writeOut(file);
    if (code != SQLITE_OK) return code;
    return file->real->pMethods->xFileControl(file->real, operation, argument);
}

static int gatheredSectorSize(sqlite3_file *base) {
    GatheredFile *file = (GatheredFile *)base;
    return file->real->pMethods->xSectorSize(file->real);
}

static int gatheredDeviceCharacteristics(sqlite3_file *base) {
    GatheredFile *file = (GatheredFile *)base;
    return file->real->pMethods->xDeviceCharacteristics(file->real);
}

/* The wal-index (shared memory) and memory mapping belong to the database file. */
static int gatheredShmMap(sqlite3_file *base, int region, int size, int extend, void volatile **memory) {
    GatheredFile *file = (GatheredFile *)base;
    return file->real->pMethods->xShmMap(file->real, region, size, extend, memory);
}

static int gatheredShmLock(sqlite3_file *base, int offset, int count, int flags) {
    GatheredFile *file = (GatheredFile *)base;
    int code = writeOut(file);
    if (code != SQLITE_OK) return code;
    return file->real->pMethods->xShmLock(file->real, offset, count, flags);
}

static void gatheredShmBarrier(sqlite3_file *base) {
    GatheredFile *file = (GatheredFile *)base;
    file->real->pMethods->xShmBarrier(file->real);
}

static int gatheredShmUnmap(sqlite3_file *base, int deleteFlag) {
    GatheredFile *file = (GatheredFile *)base;
    return file->real->pMethods->xShmUnmap(file->real, deleteFlag);
}

static int gatheredFetch(sqlite3_file *base, sqlite3_int64 offset, int amount, void **pointer) {
    GatheredFile *file = (GatheredFile *)base;
    int code = writeOut(file);
    if (code != SQLITE_OK) return code;
    return file->real->pMethods->xFetch(file->real, offset, amount, pointer);
}

static int gatheredUnfetch(sqlite3_file *base, sqlite3_int64 offset, void *pointer) {
    GatheredFile *file = (GatheredFile *)base;
    return file->real->pMethods->xUnfetch(file->real, offset, pointer);
}

static const sqlite3_io_methods gatheredMethods = {
    3,
    gatheredClose,
    gatheredRead,
    gatheredWrite,
    gatheredTruncate,
    gatheredSync,
    gatheredFileSize,
    gatheredLock,
    gatheredUnlock,
    gatheredCheckReservedLock,
    gatheredFileControl,
    gatheredSectorSize,
    gatheredDeviceCharacteristics,
    gatheredShmMap,
    gatheredShmLock,
    gatheredShmBarrier,
    gatheredShmUnmap,
    gatheredFetch,
    gatheredUnfetch,
};

static int gatheredOpen(sqlite3_vfs *vfs, const char *name, sqlite3_file *base, int flags, int *outFlags) {
    (void)vfs;
    GatheredFile *file = (GatheredFile *)base;
    memset(file, 0, sizeof(GatheredFile));
    file->real = (sqlite3_file *)((char *)file + sizeof(GatheredFile));
    if (flags & (SQLITE_OPEN_WAL | SQLITE_OPEN_MAIN_DB)) {
        file->isWAL = (flags & SQLITE_OPEN_WAL) != 0;
        file->buffer = sqlite3_malloc(BUFFER_SIZE);
        if (file->buffer == NULL) return SQLITE_NOMEM;
    }
    int code = defaultVFS->xOpen(defaultVFS, name, file->real, flags, outFlags);
    if (code != SQLITE_OK || file->real->pMethods == NULL) {
        /* SQLite calls xClose only on a file whose pMethods is set. */
        if (file->real->pMethods != NULL) file->real->pMethods->xClose(file->real);
        sqlite3_free(file->buffer);
        file->buffer = NULL;
        return code != SQLITE_OK ? code : SQLITE_CANTOPEN;
    }
    /* The default VFS's files are version 3 (shared memory and memory mapping) on Linux. */
    if (file->real->pMethods->iVersion < 3) {
        file->real->pMethods->xClose(file->real);
        sqlite3_free(file->buffer);
        file->buffer = NULL;
        return SQLITE_CANTOPEN;
    }
    file->base.pMethods = &gatheredMethods;
    return SQLITE_OK;
}

/* Everything but opening a file is the default VFS's own. */
static int gatheredDelete(sqlite3_vfs *vfs, const char *name, int syncDirectory) {
    (void)vfs;
    return defaultVFS->xDelete(defaultVFS, name, syncDirectory);
}

static int gatheredAccess(sqlite3_vfs *vfs, const char *name, int flags, int *result) {
    (void)vfs;
    return defaultVFS->xAccess(defaultVFS, name, flags, result);
}

static int gatheredFullPathname(sqlite3_vfs *vfs, const char *name, int size, char *result) {
    (void)vfs;
    return defaultVFS->xFullPathname(defaultVFS, name, size, result);
}

static void *gatheredDlOpen(sqlite3_vfs *vfs, const char *name) {
    (void)vfs;
    return defaultVFS->xDlOpen(defaultVFS, name);
}

static void gatheredDlError(sqlite3_vfs *vfs, int size, char *message) {
    (void)vfs;
    defaultVFS->xDlError(defaultVFS, size, message);
}

static void (*gatheredDlSym(sqlite3_vfs *vfs, void *library, const char *symbol))(void) {
    (void)vfs;
    return defaultVFS->xDlSym(defaultVFS, library, symbol);
}

static void gatheredDlClose(sqlite3_vfs *vfs, void *library) {
    (void)vfs;
    defaultVFS->xDlClose(defaultVFS, library);
}

static int gatheredRandomness(sqlite3_vfs *vfs, int size, char *output) {
    (void)vfs;
    return defaultVFS->xRandomness(defaultVFS, size, output);
}

static int gatheredSleep(sqlite3_vfs *vfs, int microseconds) {
    (void)vfs;
    return defaultVFS->xSleep(defaultVFS, microseconds);
}

static int gatheredCurrentTime(sqlite3_vfs *vfs, double *time) {
    (void)vfs;
    return defaultVFS->xCurrentTime(defaultVFS, time);
}

static int gatheredGetLastError(sqlite3_vfs *vfs, int size, char *message) {
    (void)vfs;
    return defaultVFS->xGetLastError(defaultVFS, size, message);
}

static int gatheredCurrentTimeInt64(sqlite3_vfs *vfs, sqlite3_int64 *time) {
    (void)vfs;
    return defaultVFS->xCurrentTimeInt64(defaultVFS, time);
}

static sqlite3_vfs gatheredVFS = {
    2,                  /* iVersion: no system-call overrides (version 3) */
    0,                  /* szOsFile, set at registration */
    0,                  /* mxPathname, set at registration */
    NULL,
    "lifecycled-gathered-writes",
    NULL,
    gatheredOpen,
    gatheredDelete,
    gatheredAccess,
    gatheredFullPathname,
    gatheredDlOpen,
    gatheredDlError,
    gatheredDlSym,
    gatheredDlClose,
    gatheredRandomness,
    gatheredSleep,
    gatheredCurrentTime,
    gatheredGetLastError,
    gatheredCurrentTimeInt64,
    NULL, NULL, NULL,
};

const char *lc_gathered_writes_vfs(void) {
    /* sqlite3_vfs_find and sqlite3_vfs_register hold SQLite's own mutex; the caller (a Swift
       static) runs this once. */
    if (sqlite3_vfs_find(gatheredVFS.zName) != NULL) return gatheredVFS.zName;
    defaultVFS = sqlite3_vfs_find(NULL);
    if (defaultVFS == NULL || defaultVFS->iVersion < 2) return NULL;
    gatheredVFS.szOsFile = (int)sizeof(GatheredFile) + defaultVFS->szOsFile;
    gatheredVFS.mxPathname = defaultVFS->mxPathname;
    if (sqlite3_vfs_register(&gatheredVFS, 0) != SQLITE_OK) return NULL;
    return gatheredVFS.zName;
}
