/*
 * rsocket.c - the rsocket calls of librdmacm (<rdma/rsocket.h>), which
 * rstream, riostream, rcopy, udpong and librspreload.so use. softnic does
 * not speak rsockets' protocol yet: rsocket() fails with ENOSYS, so no
 * descriptor is ever an rsocket, every call on one fails with EBADF, and
 * rpoll and rselect, which programs also call on ordinary descriptors
 * (cmtime, mckey, rping poll their CM channels with rpoll), are poll and
 * select.
 */
#define _GNU_SOURCE
#include <poll.h>
#include <rdma/rsocket.h>
#include <sys/select.h>

#include "cma.h"

SN_EXPORT int rsocket(int domain, int type, int protocol)
{
	return ERR(ENOSYS);
}

#define NOT_AN_RSOCKET return ERR(EBADF)

SN_EXPORT int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen) { NOT_AN_RSOCKET; }
SN_EXPORT int rlisten(int socket, int backlog) { NOT_AN_RSOCKET; }
SN_EXPORT int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen) { NOT_AN_RSOCKET; }
SN_EXPORT int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen) { NOT_AN_RSOCKET; }
SN_EXPORT int rshutdown(int socket, int how) { NOT_AN_RSOCKET; }
SN_EXPORT int rclose(int socket) { NOT_AN_RSOCKET; }
SN_EXPORT ssize_t rrecv(int socket, void *buf, size_t len, int flags) { NOT_AN_RSOCKET; }
SN_EXPORT ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags, struct sockaddr *src_addr,
			    socklen_t *addrlen) { NOT_AN_RSOCKET; }
SN_EXPORT ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags) { NOT_AN_RSOCKET; }
SN_EXPORT ssize_t rsend(int socket, const void *buf, size_t len, int flags) { NOT_AN_RSOCKET; }
SN_EXPORT ssize_t rsendto(int socket, const void *buf, size_t len, int flags, const struct sockaddr *dest_addr,
			  socklen_t addrlen) { NOT_AN_RSOCKET; }
SN_EXPORT ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags) { NOT_AN_RSOCKET; }
SN_EXPORT ssize_t rread(int socket, void *buf, size_t count) { NOT_AN_RSOCKET; }
SN_EXPORT ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt) { NOT_AN_RSOCKET; }
SN_EXPORT ssize_t rwrite(int socket, const void *buf, size_t count) { NOT_AN_RSOCKET; }
SN_EXPORT ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt) { NOT_AN_RSOCKET; }
SN_EXPORT int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen) { NOT_AN_RSOCKET; }
SN_EXPORT int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen) { NOT_AN_RSOCKET; }
SN_EXPORT int rsetsockopt(int socket, int level, int optname, const void *optval, socklen_t optlen)
{
	NOT_AN_RSOCKET;
}
SN_EXPORT int rgetsockopt(int socket, int level, int optname, void *optval, socklen_t *optlen) { NOT_AN_RSOCKET; }
SN_EXPORT int rfcntl(int socket, int cmd, ...) { NOT_AN_RSOCKET; }
SN_EXPORT off_t riomap(int socket, void *buf, size_t len, int prot, int flags, off_t offset) { NOT_AN_RSOCKET; }
SN_EXPORT int riounmap(int socket, void *buf, size_t len) { NOT_AN_RSOCKET; }
SN_EXPORT size_t riowrite(int socket, const void *buf, size_t count, off_t offset, int flags)
{
	ERR(EBADF);
	return 0;
}

SN_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	return poll(fds, nfds, timeout);
}

SN_EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds, struct timeval *timeout)
{
	return select(nfds, readfds, writefds, exceptfds, timeout);
}
