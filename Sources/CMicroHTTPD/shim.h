#ifndef LIFECYCLED_CMICROHTTPD_SHIM_H
#define LIFECYCLED_CMICROHTTPD_SHIM_H

#include <microhttpd.h>

/* MHD_start_daemon is variadic, which Swift cannot call. This fixed-signature
   wrapper passes the completion callback and an MHD_OPTION_ARRAY built in Swift. */
static inline struct MHD_Daemon *lc_mhd_start(unsigned int flags,
                                              MHD_AccessHandlerCallback handler, void *handler_cls,
                                              MHD_RequestCompletedCallback completed, void *completed_cls,
                                              const struct MHD_OptionItem *options) {
    return MHD_start_daemon(flags, 0, NULL, NULL, handler, handler_cls,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, completed_cls,
                            MHD_OPTION_ARRAY, options,
                            MHD_OPTION_END);
}

#endif
