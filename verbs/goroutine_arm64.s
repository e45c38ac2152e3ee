#include "textflag.h"

// func goroutine() uintptr: the runtime's g of the calling goroutine,
// which arm64 keeps in register g (R28).
TEXT ·goroutine(SB), NOSPLIT, $0-8
	MOVD g, R0
	MOVD R0, ret+0(FP)
	RET
