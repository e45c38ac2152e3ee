package pingpong

import (
	"context"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/verbs"
)

// The pieces other pingpong-like tools (tools/tmpingpong) share with
// these: the out-of-band exchange, the GID choice and the address vector.

// Exchange runs the out-of-band address exchange of one side, as Run does
// (pp_client_exch_dest / pp_server_exch_dest): it uses cfg.ServerName
// (client when set), cfg.Port and env's Listener, Dial, Stall,
// AcceptTimeout and ConnectRetry. The server calls connect with the
// client's addresses before it answers; the client connects after it
// returns.
func Exchange(ctx context.Context, cfg Config, env toolnic.Env, my []Dest, connect func([]Dest) error) ([]Dest, error) {
	env = env.WithDefaults()
	return exchange(ctx, &cfg, &env, my, connect)
}

// LocalGID returns the GID to advertise and the sgid index to use for
// cfg.GIDIndex, as Run chooses them (index 0 with a warning on env.Err
// when the table lacks the index; zeros for -1).
func LocalGID(cfg Config, env toolnic.Env) (verbs.GID, int, error) {
	env = env.WithDefaults()
	return localGID(&cfg, &env)
}

// AHAttr is the address vector towards rem the examples build (a GRH when
// rem has a GID), with cfg's SL and port.
func AHAttr(cfg Config, rem Dest, sgid int, hopLimit uint8) ibv.AHAttr {
	return ahAttr(&cfg, rem, sgid, hopLimit)
}

// NoGRHHint explains a failed connect to a peer that sent no GID.
func NoGRHHint(rem Dest, err error) error { return noGRHHint(rem, err) }
