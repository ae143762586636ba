#ifndef LIFECYCLED_CSQLITE_SHIM_H
#define LIFECYCLED_CSQLITE_SHIM_H

#include <sqlite3.h>

/* Stops SQLite counting the memory it holds (sqlite3_memory_used, sqlite3_status and the
   heap limits read that count; lifecycled reads none of them). The count is kept under a
   process-wide mutex taken on every allocation and free, some 18 of each for a stored item.
   Only before SQLite's first use: after it, SQLITE_MISUSE and the count goes on.
   (sqlite3_config is variadic, which Swift cannot call.) */
static inline int lc_sqlite3_stop_counting_memory(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

#endif
