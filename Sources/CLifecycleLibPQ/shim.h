#ifndef LIFECYCLED_CLIBPQ_SHIM_H
#define LIFECYCLED_CLIBPQ_SHIM_H

#include <libpq-fe.h>

/* The PG_DIAG_ field codes are character-literal macros, which Swift does not import. */
static inline const char *lc_pq_sqlstate(const PGresult *result) {
    return PQresultErrorField(result, PG_DIAG_SQLSTATE);
}

static inline const char *lc_pq_message(const PGresult *result) {
    return PQresultErrorField(result, PG_DIAG_MESSAGE_PRIMARY);
}

static inline const char *lc_pq_detail(const PGresult *result) {
    return PQresultErrorField(result, PG_DIAG_MESSAGE_DETAIL);
}

#endif
