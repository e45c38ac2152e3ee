//go:build amd64 || arm64

package verbs

// goroutine returns a token for the calling goroutine that no other
// goroutine alive at the same time shares: the address of its runtime g,
// read from where the runtime keeps it (thread-local storage on amd64,
// register g on arm64; goroutine_amd64.s, goroutine_arm64.s), the
// goroutine's number elsewhere (goroutine_other.go). A QPEx batch records
// it in WrStart so that PostSend and BindMW can tell the goroutine that
// holds the batch, which must be refused (it would wait on itself), from
// any other, which waits (qp.go, lockPost). A goroutine's token does not
// change while it lives, however its stack moves; a C thread calling into
// Go (cgo) keeps one goroutine, hence one token, from call to call, so in
// a C library over verbs the token tells threads apart as mlx5's
// send-queue lock does.
func goroutine() uintptr
