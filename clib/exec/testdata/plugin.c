/*
 * plugin.c - a library linked with libibverbs, as NCCL's and libfabric's
 * verbs plugins are, which dlopen.c loads late.
 */
#include "loop.h"

int run_loop(void)
{
	struct loop l;

	loop_open(&l, 16, 64);
	for (int i = 0; i < 100; i++)
		transfer(&l, i);
	loop_close(&l);
	return 0;
}
