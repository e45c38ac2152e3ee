/*
 * tcpecho.c - a TCP echo over plain sockets (socket, bind, listen,
 * accept, connect, send, recv, poll, shutdown, close), for librspreload.so
 * to turn into rsockets. The client sends BYTES of a pattern in chunks of
 * growing size, up to CHUNK (which the socket buffers hold: the client
 * sends a whole chunk before it reads the echo), reads each back and
 * checks it; then it shuts down its side and reads the end of the
 * stream.
 *
 *   tcpecho server ADDR PORT
 *   tcpecho client ADDR PORT BYTES
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CHUNK 16384

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static struct sockaddr_in addr_of(const char *ip, const char *port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(atoi(port)) };

	if (inet_pton(AF_INET, ip, &sin.sin_addr) != 1)
		die("inet_pton");
	return sin;
}

/* wait_for polls fd for events, as a program over sockets does. */
static void wait_for(int fd, short events)
{
	struct pollfd p = { .fd = fd, .events = events };

	if (poll(&p, 1, 10000) != 1)
		die("poll");
}

static int serve(const char *ip, const char *port)
{
	struct sockaddr_in sin = addr_of(ip, port);
	static char buf[65536];
	long total = 0;
	ssize_t n, m, off;
	int l, fd, on = 1;

	if ((l = socket(AF_INET, SOCK_STREAM, 0)) < 0)
		die("socket");
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
	if (bind(l, (struct sockaddr *)&sin, sizeof(sin)) || listen(l, 1))
		die("bind/listen");
	printf("tcpecho: listening\n");
	fflush(stdout);
	if ((fd = accept(l, NULL, NULL)) < 0)
		die("accept");
	for (;;) {
		wait_for(fd, POLLIN);
		if ((n = recv(fd, buf, sizeof(buf), 0)) < 0)
			die("recv");
		if (!n)
			break;
		for (off = 0; off < n; off += m)
			if ((m = send(fd, buf + off, n - off, 0)) <= 0)
				die("send");
		total += n;
	}
	close(fd);
	close(l);
	printf("tcpecho: echoed %ld bytes\n", total);
	return 0;
}

static int client(const char *ip, const char *port, long bytes)
{
	struct sockaddr_in sin = addr_of(ip, port);
	static char out[2 * CHUNK], in[CHUNK];
	long done = 0, chunk = 1;
	ssize_t n, off;
	int fd, i;

	for (i = 0; i < (int)sizeof(out); i++)
		out[i] = (char)(i * 7 + i / 251);
	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
		die("socket");
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)))
		die("connect");
	printf("tcpecho: connected\n");
	fflush(stdout);
	while (done < bytes) {
		long len = chunk < bytes - done ? chunk : bytes - done;
		char *src = out + done % CHUNK;

		for (off = 0; off < len; off += n)
			if ((n = send(fd, src + off, len - off, 0)) <= 0)
				die("send");
		for (off = 0; off < len; off += n) {
			wait_for(fd, POLLIN);
			if ((n = recv(fd, in + off, len - off, 0)) <= 0)
				die("recv");
		}
		if (memcmp(in, src, len)) {
			fprintf(stderr, "tcpecho: the echo of bytes %ld-%ld differs\n", done, done + len);
			return 1;
		}
		done += len;
		chunk = chunk * 3 + 1;
		if (chunk > CHUNK)
			chunk = CHUNK;
	}
	if (shutdown(fd, SHUT_WR))
		die("shutdown");
	wait_for(fd, POLLIN);
	if ((n = recv(fd, in, 1, 0)) != 0) {
		fprintf(stderr, "tcpecho: %zd after the server's end, want 0\n", n);
		return 1;
	}
	close(fd);
	printf("tcpecho: %ld bytes echoed\n", done);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "server"))
		return serve(argv[2], argv[3]);
	if (argc == 5 && !strcmp(argv[1], "client"))
		return client(argv[2], argv[3], atol(argv[4]));
	fprintf(stderr, "usage: tcpecho server ADDR PORT | tcpecho client ADDR PORT BYTES\n");
	return 2;
}
