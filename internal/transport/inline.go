package transport

import "github.com/softnic/softnic/internal/errno"

// InlineError is the error of a send posted with SendInline whose data is
// given by SGEs that cannot be read: an address no MR of the QP's PD
// covers. Both transports copy such data when the WR is posted, so they
// refuse the WR there, with the MR table's refusal, EINVAL (ibv_post_send
// EINVAL and bad_wr), rather than send zeros. As ibv_post_send(3) says,
// the lkey is not checked (the rxe provider copies from the SGE
// addresses without looking at it): in a Go program an address means
// something only through an MR, so softnic looks the address up among
// the PD's MRs (mem.Table.Gather) and refuses only one none covers.
func InlineError(err error) error {
	return errno.Wrapf(err, "inline data")
}
