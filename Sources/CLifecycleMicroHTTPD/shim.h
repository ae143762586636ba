#ifndef LIFECYCLED_CMICROHTTPD_SHIM_H
#define LIFECYCLED_CMICROHTTPD_SHIM_H

#include <stdarg.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <microhttpd.h>

/* libmicrohttpd's log messages, already formatted: Swift cannot take a va_list. */
typedef void (*lc_mhd_log_callback)(void *context, const char *message);

/* Every callback the daemon makes, with the one context they all receive (the Swift
   server). It must outlive the daemon: the logger reads it on every message. */
struct lc_mhd_callbacks {
    void *context;
    MHD_AccessHandlerCallback access;
    MHD_RequestCompletedCallback completed;
    MHD_NotifyConnectionCallback connection;
    MHD_AcceptPolicyCallback accept;
    void *(*uri)(void *context, const char *uri, struct MHD_Connection *connection);
    size_t (*unescape)(void *context, struct MHD_Connection *connection, char *string);
    lc_mhd_log_callback log;
};

/* MHD_OPTION_EXTERNAL_LOGGER takes a variadic-style callback; this one formats the
   message (truncated past 1 KiB) and hands it to the Swift callback. */
static inline void lc_mhd_log(void *cls, const char *format, va_list arguments) {
    const struct lc_mhd_callbacks *callbacks = cls;
    char message[1024];
    vsnprintf(message, sizeof message, format, arguments);
    callbacks->log(callbacks->context, message);
}

/* MHD_start_daemon is variadic, which Swift cannot call. This fixed-signature
   wrapper passes the callbacks and an MHD_OPTION_ARRAY built in Swift. The logger
   comes first, as libmicrohttpd asks, so no start-up message goes to stderr. */
static inline struct MHD_Daemon *lc_mhd_start(unsigned int flags, const struct lc_mhd_callbacks *callbacks,
                                              const struct MHD_OptionItem *options) {
    return MHD_start_daemon(flags, 0, callbacks->accept, callbacks->context, callbacks->access, callbacks->context,
                            MHD_OPTION_EXTERNAL_LOGGER, lc_mhd_log, (void *)callbacks,
                            MHD_OPTION_NOTIFY_COMPLETED, callbacks->completed, callbacks->context,
                            MHD_OPTION_NOTIFY_CONNECTION, callbacks->connection, callbacks->context,
                            MHD_OPTION_URI_LOG_CALLBACK, callbacks->uri, callbacks->context,
                            MHD_OPTION_UNESCAPE_CALLBACK, callbacks->unescape, callbacks->context,
                            MHD_OPTION_ARRAY, options,
                            MHD_OPTION_END);
}

/* Macros with casts, which Swift does not import. */
static const uint64_t lc_size_unknown = MHD_SIZE_UNKNOWN;
static const ssize_t lc_content_reader_end_of_stream = MHD_CONTENT_READER_END_OF_STREAM;
static const ssize_t lc_content_reader_end_with_error = MHD_CONTENT_READER_END_WITH_ERROR;

/* MHD_get_connection_info is variadic too: one wrapper per piece of information used. */

static inline int lc_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : info->connect_fd;
}

static inline const struct sockaddr *lc_connection_client_address(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    return info == NULL ? NULL : info->client_addr;
}

/* The context set by the connection-notification callback. */
static inline void *lc_connection_socket_context(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info == NULL ? NULL : info->socket_context;
}

/* Size of the request's header block (request line included), or -1 while the
   headers have not all arrived (libmicrohttpd answers NULL before that state). */
static inline long lc_connection_header_size(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    return info == NULL ? -1 : (long)info->header_size;
}

/* Whether a response is queued on the connection. */
static inline int lc_connection_has_response(struct MHD_Connection *connection) {
    return MHD_get_connection_info(connection, MHD_CONNECTION_INFO_HTTP_STATUS) != NULL;
}

#endif
