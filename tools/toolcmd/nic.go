package toolcmd

import (
	"context"
	"fmt"

	"github.com/softnic/softnic/tools/getopt"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

// OpenNIC opens the NIC of a tool as env.NIC says, named name: at --addr,
// or else at the default address of a server (server "") or of a client
// of server (toolnic.ClientAddr). It sets env.Dev.
func OpenNIC(env *toolnic.Env, name, server string) (*toolnic.NIC, error) {
	cfg := env.NIC
	cfg.Name = name
	if !cfg.Addr.IsValid() {
		if server == "" {
			cfg.Addr = toolnic.DefaultServerAddr
		} else {
			a, err := toolnic.ClientAddr(server)
			if err != nil {
				return nil, fmt.Errorf("choosing the NIC address (give one with --addr): %w", err)
			}
			cfg.Addr = a
		}
	}
	n, err := toolnic.Open(cfg)
	if err != nil {
		return nil, err
	}
	env.Dev = n.Dev
	return n, nil
}

// RunOnNIC is the end of a NIC tool's command once its command line is
// parsed: it opens the NIC (OpenNIC) and, withCM, a connection manager on
// it (env.CM), calls run on a context that SIGINT and SIGTERM cancel, and
// closes the CM and the NIC. It returns run's error, else the NIC's
// closing's (a pcap or metrics file that could not be written), else nil.
func RunOnNIC(env *toolnic.Env, name, server string, withCM bool, run func(ctx context.Context, env toolnic.Env) error) error {
	n, err := OpenNIC(env, name, server)
	if err != nil {
		return err
	}
	if withCM {
		c, err := cm.New(cm.Config{Devices: []*verbs.Device{n.Dev}})
		if err != nil {
			n.Close()
			return fmt.Errorf("starting the connection manager: %w", err)
		}
		env.CM = c
	}
	ctx, cancel := Context()
	defer cancel()
	err = run(ctx, *env)
	if env.CM != nil {
		env.CM.Close()
	}
	if cerr := n.Close(); err == nil {
		err = cerr
	}
	return err
}

// ServerHost ends the parsing of a client-server tool's command line
// (the pingpongs', perftest's): it takes the NIC options into env and
// returns the one operand, the server's host ("" for a server). err, the
// error of the tool's own options, comes first; then more than one
// operand, worded by the format many (a %q takes the operands); then a
// bad NIC option.
func ServerHost(env *toolnic.Env, r *getopt.Result, err error, many string) (string, error) {
	if err == nil && len(r.Operands) > 1 {
		err = fmt.Errorf(many, r.Operands)
	}
	if nerr := ParseNICOpts(r, env); err == nil {
		err = nerr
	}
	if err != nil || len(r.Operands) == 0 {
		return "", err
	}
	return r.Operands[0], nil
}
