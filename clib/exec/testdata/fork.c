/*
 * fork.c - a process that forks before it opens a device is unaffected:
 * the engine (a Go runtime) is loaded by the first ibv_open_device, so the
 * child of a parent that only listed devices opens its own and moves data.
 * A child forked after the engine started gets ENODEV from every call that
 * needs the engine (a Go runtime does not survive fork), never a hang, and
 * its parent goes on.
 *
 *   fork before | fork after
 */
#include <signal.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <unistd.h>

#include "loop.h"

static bool engine_loaded(void)
{
	char line[4096];
	FILE *f = fopen("/proc/self/maps", "r");
	bool found = false;

	if (!f)
		die("/proc/self/maps");
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "libsoftnic.so"))
			found = true;
	fclose(f);
	return found;
}

static void wait_child(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		die("waitpid");
	check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: %s %d",
	      WIFEXITED(st) ? "exit status" : "killed by signal",
	      WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

int main(int argc, char **argv)
{
	struct loop l;
	pid_t pid;

	if (argc != 2) {
		fprintf(stderr, "usage: fork before|after\n");
		return 1;
	}
	if (strcmp(argv[1], "before") == 0) {
		struct ibv_device **list = ibv_get_device_list(NULL);

		check(list && list[0], "no device listed");
		ibv_free_device_list(list);
		check(!engine_loaded(), "the engine is loaded by listing the devices");
		if ((pid = fork()) < 0)
			die("fork");
		if (pid == 0) {
			alarm(30);
			loop_open(&l, 16, 64);
			transfer(&l, 'c');
			loop_close(&l);
			_exit(0);
		}
		wait_child(pid);
		loop_open(&l, 16, 64);
		transfer(&l, 'p');
		loop_close(&l);
		printf("fork before: child and parent each moved data\n");
		return 0;
	}

	loop_open(&l, 16, 64);
	transfer(&l, 'a');
	if ((pid = fork()) < 0)
		die("fork");
	if (pid == 0) {
		struct ibv_device **list;
		struct ibv_wc wc;

		alarm(10); /* a hang kills the child: the parent sees SIGALRM */
		list = ibv_get_device_list(NULL);
		check(list && list[0], "the child lists no device");
		errno = 0;
		check(!ibv_open_device(list[0]) && errno == ENODEV,
		      "ibv_open_device in the child: want ENODEV, errno %d", errno);
		errno = 0;
		check(!ibv_alloc_pd(l.ctx) && errno == ENODEV,
		      "ibv_alloc_pd on the parent's context: want ENODEV, errno %d", errno);
		check(ibv_poll_cq(l.cq, 1, &wc) < 0, "ibv_poll_cq on the parent's CQ: want an error");
		check(post_write(&l, 1, 0, 8192, 8) == ENODEV, "ibv_post_send: want ENODEV");
		_exit(0);
	}
	wait_child(pid);
	transfer(&l, 'b');
	loop_close(&l);
	printf("fork after: the child got ENODEV, the parent moved data on\n");
	return 0;
}
