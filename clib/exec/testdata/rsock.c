/*
 * rsock.c - rsockets (and riomap) misused and on one connection to itself, over
 * softnic's librdmacm: every misuse fails with the errno a socket call
 * would give, never crashes; rpoll waits without burning the CPU; a
 * close is an end of stream on the other side.
 *
 *   rsock ADDR
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/rsocket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/uio.h>
#include <sys/socket.h>
#include <unistd.h>

static int failed;

#define FAILS(call, want)                                                                        \
	do {                                                                                     \
		errno = 0;                                                                       \
		long r_ = (long)(call);                                                          \
		if (r_ != -1 || errno != (want)) {                                               \
			printf("FAIL %s: %ld, errno %d (%s), want -1 errno %d (%s)\n", #call, r_, \
			       errno, strerror(errno), want, strerror(want));                    \
			failed = 1;                                                              \
		}                                                                                \
	} while (0)

#define OK(call)                                                                                         \
	do {                                                                                             \
		errno = 0;                                                                               \
		if ((long)(call) < 0) {                                                                  \
			printf("FAIL %s: errno %d (%s)\n", #call, errno, strerror(errno));               \
			exit(1);                                                                         \
		}                                                                                        \
	} while (0)

static struct sockaddr_in addr_of(const char *ip, int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };

	inet_pton(AF_INET, ip, &sin.sin_addr);
	return sin;
}

/* thread_cpu_ms is the calling thread's CPU time. */
static long thread_cpu_ms(void)
{
	struct rusage ru;

	getrusage(RUSAGE_THREAD, &ru);
	return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
}

/* idle_poll checks that rpoll of fd for 300 ms with nothing to report
 * returns 0 and takes little of the thread's CPU. */
static void idle_poll(const char *what, int fd, short events)
{
	struct pollfd p = { .fd = fd, .events = events };
	long cpu = thread_cpu_ms();
	int n = rpoll(&p, 1, 300);

	cpu = thread_cpu_ms() - cpu;
	if (n != 0) {
		printf("FAIL rpoll of %s: %d (revents %#x), want 0\n", what, n, p.revents);
		failed = 1;
	}
	if (cpu > 100) {
		printf("FAIL rpoll of %s spun: %ld ms of CPU in 300 ms\n", what, cpu);
		failed = 1;
	}
}

static void misuse(void)
{
	char b[16];
	int s, v = 0;
	socklen_t len = sizeof(v);
	struct sockaddr_in sin;

	FAILS(rsend(0, "x", 1, 0), EBADF);
	FAILS(rrecv(12345, b, sizeof(b), 0), EBADF);
	FAILS(rclose(-1), EBADF);
	FAILS(rshutdown(1, SHUT_RDWR), EBADF);
	FAILS(rfcntl(2, F_GETFL), EBADF);
	FAILS(rsocket(AF_INET, SOCK_DGRAM, 0), ENOTSUP);
	FAILS(rsocket(AF_UNIX, SOCK_STREAM, 0), ENOTSUP);

	OK(s = rsocket(AF_INET, SOCK_STREAM, 0));
	FAILS(rsend(s, "x", 1, 0), ENOTCONN);
	FAILS(rrecv(s, b, sizeof(b), 0), ENOTCONN);
	FAILS(rshutdown(s, SHUT_RDWR), ENOTCONN);
	FAILS(rshutdown(s, 42), EINVAL);
	FAILS(raccept(s, NULL, NULL), EINVAL);
	len = sizeof(sin);
	FAILS(rgetpeername(s, (struct sockaddr *)&sin, &len), ENOTCONN);
	FAILS(rfcntl(s, 9999), ENOTSUP);
	FAILS(rbind(s, NULL, 0), EINVAL);
	FAILS(rconnect(s, NULL, 0), EINVAL);
	FAILS(rsetsockopt(s, SOL_RDMA, RDMA_SQSIZE, &v, 2), EINVAL);
	FAILS(rsetsockopt(s, 12345, 1, &v, sizeof(v)), ENOTSUP);
	FAILS(riomap(s, b, sizeof(b), PROT_WRITE, 0, 0), EINVAL);
	FAILS(riounmap(s, b, sizeof(b)), EINVAL);
	FAILS(riowrite(s, b, sizeof(b), 0, 0), ENOTCONN);
	FAILS(riomap(7, b, sizeof(b), PROT_WRITE, 0, 0), EBADF);
	len = sizeof(v);
	OK(rgetsockopt(s, SOL_SOCKET, SO_ERROR, &v, &len));
	if (v) {
		printf("FAIL SO_ERROR of a new rsocket: %d\n", v);
		failed = 1;
	}
	OK(rclose(s));
	FAILS(rclose(s), EBADF);
	FAILS(rsend(s, "x", 1, 0), EBADF);
}

struct server {
	int lfd, fd;
};

static void *accept_one(void *arg)
{
	struct server *sv = arg;

	sv->fd = raccept(sv->lfd, NULL, NULL);
	return NULL;
}

/* vectors sends "ping" with rwritev, waits for it with rselect and
 * reads it with rreadv, two bytes a vector. */
static void vectors(int c, int s)
{
	struct iovec out[2] = { { "pi", 2 }, { "ng", 2 } };
	char b1[2], b2[2];
	struct iovec in[2] = { { b1, 2 }, { b2, 2 } };
	struct timeval tv = { .tv_sec = 5 };
	fd_set rd;
	ssize_t n;

	if ((n = rwritev(c, out, 2)) != 4) {
		printf("FAIL rwritev: %zd errno %d\n", n, errno);
		failed = 1;
	}
	FD_ZERO(&rd);
	FD_SET(s, &rd);
	if (rselect(s + 1, &rd, NULL, NULL, &tv) != 1 || !FD_ISSET(s, &rd)) {
		printf("FAIL rselect after a send\n");
		failed = 1;
	}
	n = rreadv(s, in, 2);
	if (n != 4 || memcmp(b1, "pi", 2) || memcmp(b2, "ng", 2)) {
		printf("FAIL rreadv: %zd errno %d\n", n, errno);
		failed = 1;
	}
}

/* loop connects an rsocket to a listener of the same process and checks
 * the connection's ends. */
static void loop(const char *ip)
{
	struct sockaddr_in sin = addr_of(ip, 7471), peer;
	struct server sv = { .fd = -1 };
	struct pollfd p;
	pthread_t th;
	socklen_t len;
	char b[8];
	int c, n, v;

	OK(sv.lfd = rsocket(AF_INET, SOCK_STREAM, 0));
	OK(rbind(sv.lfd, (struct sockaddr *)&sin, sizeof(sin)));
	OK(rlisten(sv.lfd, 4));
	FAILS(rconnect(sv.lfd, (struct sockaddr *)&sin, sizeof(sin)), EINVAL);
	OK(rfcntl(sv.lfd, F_SETFL, O_NONBLOCK));
	FAILS(raccept(sv.lfd, NULL, NULL), EAGAIN);
	idle_poll("a listener", sv.lfd, POLLIN);
	OK(rfcntl(sv.lfd, F_SETFL, 0));

	/* Nobody listens on 7472: refused, as a TCP connect. */
	OK(c = rsocket(AF_INET, SOCK_STREAM, 0));
	sin.sin_port = htons(7472);
	FAILS(rconnect(c, (struct sockaddr *)&sin, sizeof(sin)), ECONNREFUSED);
	FAILS(rsend(c, "x", 1, 0), ENOTCONN);
	OK(rclose(c));

	sin.sin_port = htons(7471);
	pthread_create(&th, NULL, accept_one, &sv);
	OK(c = rsocket(AF_INET, SOCK_STREAM, 0));
	OK(rconnect(c, (struct sockaddr *)&sin, sizeof(sin)));
	pthread_join(th, NULL);
	OK(sv.fd);
	FAILS(rconnect(c, (struct sockaddr *)&sin, sizeof(sin)), EISCONN);
	len = sizeof(peer);
	OK(rgetpeername(c, (struct sockaddr *)&peer, &len));
	if (len != sizeof(peer) || peer.sin_port != htons(7471)) {
		printf("FAIL rgetpeername: len %u port %u\n", len, ntohs(peer.sin_port));
		failed = 1;
	}

	/* Keepalives every second (zero-length RDMA WRITEs) leave the
	 * connection as it was. */
	v = 1;
	OK(rsetsockopt(c, SOL_SOCKET, SO_KEEPALIVE, &v, sizeof(v)));
	OK(rsetsockopt(c, IPPROTO_TCP, TCP_KEEPIDLE, &v, sizeof(v)));
	v = 0;
	len = sizeof(v);
	OK(rgetsockopt(c, SOL_SOCKET, SO_KEEPALIVE, &v, &len));
	if (v != 1) {
		printf("FAIL SO_KEEPALIVE: %d\n", v);
		failed = 1;
	}
	usleep(2500 * 1000);

	idle_poll("a connection without data", sv.fd, POLLIN);
	OK(rsend(c, "ping", 4, 0));
	p = (struct pollfd){ .fd = sv.fd, .events = POLLIN };
	if (rpoll(&p, 1, 5000) != 1 || !(p.revents & POLLIN)) {
		printf("FAIL rpoll after a send: revents %#x\n", p.revents);
		failed = 1;
	}
	n = rrecv(sv.fd, b, sizeof(b), MSG_PEEK);
	if (n != 4 || memcmp(b, "ping", 4)) {
		printf("FAIL rrecv MSG_PEEK: %d\n", n);
		failed = 1;
	}
	n = rrecv(sv.fd, b, sizeof(b), 0);
	if (n != 4 || memcmp(b, "ping", 4)) {
		printf("FAIL rrecv: %d\n", n);
		failed = 1;
	}
	FAILS(rrecv(sv.fd, b, sizeof(b), MSG_DONTWAIT), EAGAIN);
	vectors(c, sv.fd);

	/* Neither side offered an iomap (RDMA_IOMAPSIZE): nothing to map
	 * for the peer, nothing to write to. */
	FAILS(riomap(sv.fd, b, sizeof(b), PROT_WRITE, 0, 0), ENOMEM);
	FAILS(riowrite(c, "x", 1, 0, 0), EINVAL);
	FAILS(riomap(sv.fd, b, sizeof(b), PROT_READ, 0, 0), EINVAL);
	if (riomap(sv.fd, b, sizeof(b), 0, 0, 0) != 0 || riounmap(sv.fd, b, sizeof(b))) {
		printf("FAIL riomap and riounmap of a local mapping: errno %d\n", errno);
		failed = 1;
	}

	/* The client closes: the server reads the end of the stream, rpoll
	 * says POLLHUP, and a send fails. */
	OK(rclose(c));
	n = rrecv(sv.fd, b, sizeof(b), 0);
	if (n != 0) {
		printf("FAIL rrecv after the peer closed: %d, errno %d\n", n, errno);
		failed = 1;
	}
	p = (struct pollfd){ .fd = sv.fd, .events = POLLIN };
	if (rpoll(&p, 1, 5000) != 1 || !(p.revents & POLLHUP)) {
		printf("FAIL rpoll after the peer closed: revents %#x\n", p.revents);
		failed = 1;
	}
	FAILS(rsend(sv.fd, "x", 1, 0), ECONNRESET);
	OK(rclose(sv.fd));
	OK(rclose(sv.lfd));
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: rsock ADDR\n");
		return 2;
	}
	misuse();
	loop(argv[1]);
	if (failed)
		return 1;
	printf("rsock: ok\n");
	return 0;
}
