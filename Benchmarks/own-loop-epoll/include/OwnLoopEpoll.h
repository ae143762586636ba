// What Benchmarks/own-loop needs of Linux that Swift's Glibc module leaves out.
#include <sys/epoll.h>
#include <sys/eventfd.h>

/// accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC, the peer's address not asked for.
int own_loop_accept(int listener);
