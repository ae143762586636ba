#ifndef LIFECYCLED_SQLITE_VFS_H
#define LIFECYCLED_SQLITE_VFS_H

/* The VFS lifecycled opens its databases with: SQLite's default one, with a WAL's and a
   database file's writes gathered into fewer system calls (see gathered_writes.c). */

/* Registers the VFS (once; later calls return the same name) and returns its name for
   sqlite3_open_v2, or NULL if SQLite has no default VFS to build on. */
const char *lc_gathered_writes_vfs(void);

#endif
