/*
 * dlopen.c - libibverbs loaded late with dlopen, by a program that runs
 * threads already and never linked it: directly (ibv_get_device_list by
 * dlsym), then as the dependency of a plugin that moves data. The engine
 * is loaded by a dlopen nested in the plugin's first ibv_open_device.
 *
 *   dlopen PLUGIN
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *idle(void *arg)
{
	pause();
	return arg;
}

int main(int argc, char **argv)
{
	struct ibv_device;
	struct ibv_device **(*list)(int *);
	const char *(*name)(struct ibv_device *);
	int (*run)(void);
	pthread_t th;
	void *v, *p;
	int n;

	if (argc != 2) {
		fprintf(stderr, "usage: dlopen PLUGIN\n");
		return 1;
	}
	pthread_create(&th, NULL, idle, NULL);
	v = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!v) {
		fprintf(stderr, "dlopen libibverbs.so.1: %s\n", dlerror());
		return 1;
	}
	list = (struct ibv_device **(*)(int *))dlsym(v, "ibv_get_device_list");
	name = (const char *(*)(struct ibv_device *))dlsym(v, "ibv_get_device_name");
	if (!list || !name || !list(&n) || n != 1) {
		fprintf(stderr, "ibv_get_device_list by dlsym\n");
		return 2;
	}
	p = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!p) {
		fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
		return 1;
	}
	run = (int (*)(void))dlsym(p, "run_loop");
	if (!run || run() != 0)
		return 2;
	printf("dlopen: %s listed, the plugin moved data\n", name(list(NULL)[0]));
	return 0;
}
