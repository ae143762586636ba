#ifndef LIFECYCLED_CLIBPQ_SHIM_H
#define LIFECYCLED_CLIBPQ_SHIM_H

#include <libpq-fe.h>

/* PG_DIAG_SQLSTATE is a character-literal macro, which Swift does not import. */
static inline const char *lc_pq_sqlstate(const PGresult *result) {
    return PQresultErrorField(result, PG_DIAG_SQLSTATE);
}

#endif
