/*
 * bench.c - what a call into the engine costs: every data-path call of
 * softnic's libibverbs is one C-to-Go call. It prints nanoseconds per call
 * of:
 *   go_call     a Go function that does nothing (sne_abi_version): the
 *               C-to-Go transition alone
 *   poll_empty  ibv_poll_cq on an empty CQ (the engine then reads the
 *               link once, a non-blocking recvmmsg that finds nothing)
 *   post_send   ibv_post_send of one 8-byte RDMA WRITE, batches of 32
 *               posted back to back, then polled
 *   write_rtt   one 8-byte RDMA WRITE posted and its completion polled
 *               (through the loopback: the engine sends, receives, ACKs)
 */
#include <dlfcn.h>

#include "loop.h"

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 200000;
	struct ibv_wc wc;
	struct loop l;
	int (*nop)(void);
	void *e;
	double t;

	loop_open(&l, 64, 256);
	e = dlopen("libsoftnic.so", RTLD_NOW | RTLD_NOLOAD);
	if (!e)
		die("the engine is not loaded: %s", dlerror());
	nop = (int (*)(void))dlsym(e, "sne_abi_version");

	t = now();
	for (int i = 0; i < n; i++)
		nop();
	printf("go_call %.0f\n", (now() - t) / n);

	t = now();
	for (int i = 0; i < n; i++)
		check(ibv_poll_cq(l.cq, 1, &wc) == 0, "a completion on an idle CQ");
	printf("poll_empty %.0f\n", (now() - t) / n);

	{
		double posting = 0;
		int k = n / 32;

		for (int i = 0; i < k; i++) {
			t = now();
			for (int j = 0; j < 32; j++)
				if (post_write(&l, j, 0, 4096, 8))
					die("ibv_post_send");
			posting += now() - t;
			for (int j = 0; j < 32; j++)
				poll_one(&l, 10);
		}
		printf("post_send %.0f\n", posting / (k * 32));
	}

	t = now();
	for (int i = 0; i < n / 10; i++) {
		if (post_write(&l, i, 0, 4096, 8))
			die("ibv_post_send");
		poll_one(&l, 10);
	}
	printf("write_rtt %.0f\n", (now() - t) / (n / 10));
	loop_close(&l);
	return 0;
}
