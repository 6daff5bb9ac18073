// fakemain.c links against the fake libjvm.so: it prints the address range
// of its "heap" and "ready", then runs fake_gc once per line on stdin and
// prints "done" after each.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fake_gc(char *dst, const char *src, size_t n);

#define N (64 * 1024)

int main(void)
{
	char *heap = malloc(4 * N);
	char line[64];

	if (!heap)
		return 1;
	memset(heap, 1, 4 * N);
	printf("heap %p %p\nready\n", (void *)heap, (void *)(heap + N));
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		fake_gc(heap + 2 * N, heap, N);
		printf("done\n");
		fflush(stdout);
	}
	return 0;
}
