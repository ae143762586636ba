#define _GNU_SOURCE
#include <stddef.h>
#include <sys/socket.h>
#include "OwnLoopEpoll.h"

int own_loop_accept(int listener) { return accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC); }
