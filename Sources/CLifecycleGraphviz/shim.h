#ifndef LIFECYCLED_CGRAPHVIZ_SHIM_H
#define LIFECYCLED_CGRAPHVIZ_SHIM_H

/* Everything LifecycleGraph calls (gvContext, agmemread, gvLayout, gvRenderData, agseterrf
   and their frees) is a plain function Swift can call: no wrappers are needed. */
#include <gvc.h>

#endif
