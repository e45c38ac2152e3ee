#include "textflag.h"

// func goroutine() uintptr: the runtime's g of the calling goroutine,
// kept in thread-local storage (runtime get_tls; the assembler emits the
// access each build mode needs, c-shared included).
TEXT ·goroutine(SB), NOSPLIT, $0-8
	MOVQ (TLS), AX
	MOVQ AX, ret+0(FP)
	RET
