/*
 * threads.c - threads posting to one QP at once: each of THREADS threads
 * posts WRITES signaled RDMA WRITEs of its own 8-byte values to one RC QP
 * while the main thread polls the CQ; every work request completes once,
 * and every value lands.
 */
#include <pthread.h>
#include <sched.h>

#include "loop.h"

#define THREADS 4
#define WRITES 2000
#define DST (BUF_SIZE / 2)

static struct loop l;

static void *poster(void *arg)
{
	uint64_t t = (uintptr_t)arg;

	for (uint64_t s = 0; s < WRITES; s++) {
		uint64_t id = t << 32 | s;
		size_t off = (t * WRITES + s) * 8;
		int err;

		memcpy(l.buf + off, &id, 8);
		/* A full send queue (ENOMEM) is tried again. */
		while ((err = post_write(&l, id, off, DST + off, 8)) == ENOMEM)
			sched_yield();
		if (err) {
			errno = err;
			die("ibv_post_send from thread %llu", (unsigned long long)t);
		}
	}
	return NULL;
}

int main(void)
{
	static unsigned char seen[THREADS][WRITES];
	pthread_t th[THREADS];
	int n = 0;

	/* Room for every completion: the send queue frees a slot when a
	 * completion is queued, not when it is polled, so the posters may
	 * run ahead of the poller by more than the queue's depth. */
	loop_open(&l, 64, THREADS * WRITES + 64);
	for (uintptr_t t = 0; t < THREADS; t++)
		pthread_create(&th[t], NULL, poster, (void *)t);
	while (n < THREADS * WRITES) {
		struct ibv_wc wc = poll_one(&l, 30);
		uint64_t t = wc.wr_id >> 32, s = wc.wr_id & 0xffffffff;

		check(t < THREADS && s < WRITES, "completion of an unknown wr_id %llx",
		      (unsigned long long)wc.wr_id);
		check(!seen[t][s]++, "wr_id %llx completed twice", (unsigned long long)wc.wr_id);
		n++;
	}
	for (int t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	for (uint64_t t = 0; t < THREADS; t++)
		for (uint64_t s = 0; s < WRITES; s++) {
			uint64_t v;

			memcpy(&v, l.buf + DST + (t * WRITES + s) * 8, 8);
			check(v == (t << 32 | s), "value %llx at thread %llu write %llu", (unsigned long long)v,
			      (unsigned long long)t, (unsigned long long)s);
		}
	loop_close(&l);
	printf("threads: %d threads posted %d WRITEs to one QP, each completed once and landed\n",
	       THREADS, THREADS * WRITES);
	return 0;
}
