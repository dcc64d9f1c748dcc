package sshclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"prun/rsh/sshproto"
)

// lookup answers whether the host a session to host dials first has an
// address, before a launch starts anything: host itself, its ssh_config
// HostName, or the first host of its ProxyJump chain (the node's own name
// is looked up there, not here). It returns why that name surely does not
// resolve (the lookup found no such host), else "": a name that resolves,
// an address, a lookup that failed otherwise (a timeout, no DNS server) or
// a configuration the session will refuse, which the session will report.
func lookup(ctx context.Context, host string, opts Options) string {
	home := homeDir(opts.Home)
	cs, err := loadConfigs(home)
	if err != nil {
		return ""
	}
	route, err := cs.route(host, "", "", nil, home, 0)
	if err != nil {
		return ""
	}
	first := route[0]
	name := first.hostname
	if _, err := netip.ParseAddr(name); err == nil {
		return ""
	}
	_, err = net.DefaultResolver.LookupHost(ctx, name)
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		return ""
	}
	switch {
	case len(route) > 1 && name != first.alias:
		return fmt.Sprintf("its ProxyJump host %s (HostName %s): no such host", first.alias, name)
	case len(route) > 1:
		return fmt.Sprintf("its ProxyJump host %s: no such host", name)
	case name != host:
		return fmt.Sprintf("its ssh_config HostName %s: no such host", name)
	}
	return "no such host"
}

// lookup answers an OpLookup request.
func (s *server) lookup(ctx context.Context, req sshproto.Request) {
	why := lookup(ctx, req.Host, Options{Home: string(req.Home)})
	s.mu.Lock()
	delete(s.ctxs, req.ID)
	s.mu.Unlock()
	s.reply(sshproto.Reply{Op: sshproto.OpLookedUp, ID: req.ID, Err: why})
}
