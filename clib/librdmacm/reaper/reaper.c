/*
 * reaper.c - softnic-cm-reaper, the watcher of a process whose librdmacm
 * is softnic's (clib/librdmacm/orphan.c): it waits for the process to be
 * gone and sends, from the process's address and UDP port, the messages
 * the kernel's rdma_cm would have sent for it (each established
 * connection's DREQ), which the process's engine left ready in the table
 * they share, unless the process closed its CM itself.
 *
 * Started with fd 3 the table (a memfd) and fd 4 a pidfd of the process;
 * argv[1] is its PID, for ps. It leaves its parent at once (the program
 * never reaps it) and sends each message three times, 0.5 s and 1 s
 * apart, as a MAD layer resends one that goes unanswered, holding the
 * NIC's UDP port only while it sends.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "softnic_engine.h"

enum { TABLE_FD = 3, PIDFD = 4 };

static socklen_t sockaddr_of(const struct sn_addr *a, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (a->family == AF_INET) {
		struct sockaddr_in *s = (struct sockaddr_in *)ss;
		s->sin_family = AF_INET;
		s->sin_port = htons(a->port);
		memcpy(&s->sin_addr, a->addr, 4);
		return sizeof(*s);
	}
	if (a->family == AF_INET6) {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)ss;
		s->sin6_family = AF_INET6;
		s->sin6_port = htons(a->port);
		s->sin6_scope_id = a->scope_id;
		memcpy(&s->sin6_addr, a->addr, 16);
		return sizeof(*s);
	}
	return 0;
}

/* The socket the process's NIC sent from: its address and port, the DF
 * bit set, as the ICRC of each message assumes (IPv4 identification 0). */
static int nic_socket(const struct sn_orphans *t)
{
	struct sockaddr_storage ss;
	socklen_t n = sockaddr_of(&t->src, &ss);
	int one = 1, fd;

	if (!n)
		return -1;
	fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ss.ss_family == AF_INET) {
		int v = IP_PMTUDISC_DO;
		setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &v, sizeof(v));
	} else {
		int v = IPV6_PMTUDISC_DO;
		setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &v, sizeof(v));
	}
	if (bind(fd, (struct sockaddr *)&ss, n)) {
		close(fd);
		return -1;
	}
	return fd;
}

int main(void)
{
	static const int ignore[] = { SIGINT, SIGHUP, SIGQUIT, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU };
	struct pollfd p = { .fd = PIDFD, .events = POLLIN };
	const struct sn_orphans *t;
	pid_t pid;
	int fd;

	if (syscall(SYS_close_range, PIDFD + 1, ~0U, 0))
		for (int i = PIDFD + 1; i < 1024; i++)
			close(i);
	for (size_t i = 0; i < sizeof(ignore) / sizeof(ignore[0]); i++)
		signal(ignore[i], SIG_IGN);
	pid = fork();
	if (pid != 0)
		_exit(pid < 0);
	t = mmap(NULL, sizeof(*t), PROT_READ, MAP_SHARED, TABLE_FD, 0);
	if (t == MAP_FAILED)
		return 1;
	while (poll(&p, 1, -1) < 0 && errno == EINTR)
		;
	if (t->magic != SN_ORPHAN_MAGIC || __atomic_load_n(&t->closed, __ATOMIC_ACQUIRE))
		return 0;
	for (int round = 0; round < 3; round++) {
		struct timespec gap = { .tv_sec = round, .tv_nsec = round ? 0 : 500000000 };

		/* The port is the NIC's only while a round is sent: a program
		 * started again at the address in between takes it, and the
		 * rounds after that are its business (its CM answers). */
		fd = nic_socket(t);
		if (fd < 0)
			return round == 0;
		for (int i = 0; i < SN_ORPHAN_SLOTS; i++) {
			const struct sn_orphan *s = &t->slot[i];
			struct sockaddr_storage ss;
			socklen_t n;

			if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != SN_ORPHAN_READY || s->len > SN_ORPHAN_PKT)
				continue;
			n = sockaddr_of(&s->dst, &ss);
			if (n)
				sendto(fd, s->pkt, s->len, 0, (struct sockaddr *)&ss, n);
		}
		close(fd);
		if (round < 2)
			nanosleep(&gap, NULL);
	}
	return 0;
}
