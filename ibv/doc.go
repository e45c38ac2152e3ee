// Package ibv holds the values of softnic's verbs API: libibverbs' structs
// and enums in Go. Each type is the libibverbs struct or enum its doc
// names (SendWR is struct ibv_send_wr, WorkCompletion struct ibv_wc,
// QPAttr struct ibv_qp_attr), each field carries its libibverbs name, and
// every constant has libibverbs' numeric value, so the man pages
// (ibv_post_send(3), ibv_poll_cq(3), ibv_modify_qp(3), ...) describe them.
//
// Package verbs takes and returns these values; the engine under
// internal/ uses the same types, so a work request is neither copied nor
// converted on its way from PostSend to the transport. The package has no
// behaviour beyond small methods on the values (MTU.Bytes, String on
// every enum) and imports nothing of softnic's.
//
// Where Go differs from C: lists are slices (SendWR.SGList is sg_list
// with num_sge its length, and a batch of work requests is a slice
// rather than a chain of next pointers); unions are separate fields
// (SendWR.Imm and SendWR.InvRKey); GIDs are netip.Addr values
// (IPv4-mapped for IPv4, as RoCEv2 GIDs are).
package ibv
