package transport

import "github.com/softnic/softnic/internal/errno"

// InlineError is the error of a send posted with SendInline whose data is
// given by SGEs that cannot be read: an lkey naming no MR of the QP's PD,
// or a range outside its MR. Both transports copy such data when the WR
// is posted, so they refuse the WR there, with the MR table's refusal,
// EINVAL (ibv_post_send EINVAL and bad_wr), rather than send zeros. The rxe provider copies
// inline data from the SGE addresses without looking at the lkey; in a
// Go program an address means something only through its MR, so softnic
// checks what rxe does not.
func InlineError(err error) error {
	return errno.Wrapf(err, "inline data")
}
