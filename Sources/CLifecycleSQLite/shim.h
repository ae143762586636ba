#ifndef LIFECYCLED_CSQLITE_SHIM_H
#define LIFECYCLED_CSQLITE_SHIM_H

#include <sqlite3.h>

#endif
