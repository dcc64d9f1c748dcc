package ctl

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// ListenOn is Listen on each of hosts (IP addresses), all on one port:
// a vertex listens on the addresses it tells its children, and on no
// other (a wildcard bind would also answer on every other network of the
// machine, external ones included). An address that cannot be bound
// (EADDRNOTAVAIL: an IPv6 address still tentative, or gone) is left out;
// Hosts says which were bound, which is what the caller advertises.
func ListenOn(hosts []string, ports [][2]int, secret []byte) (*Listener, error) {
	if len(secret) != SecretSize {
		return nil, fmt.Errorf("ctl: secret of %d bytes, want %d", len(secret), SecretSize)
	}
	if len(hosts) == 0 {
		return nil, errors.New("ctl: no address to listen on")
	}
	ml, err := listenAll(hosts, ports)
	if err != nil {
		return nil, err
	}
	l := &Listener{ln: ml, secret: secret, links: make(chan *Link, 64)}
	go l.serve()
	return l, nil
}

// Hosts are the addresses the listener is bound to.
func (l *Listener) Hosts() []string {
	if ml, ok := l.ln.(*multiListener); ok {
		return append([]string(nil), ml.hosts...)
	}
	return []string{l.ln.Addr().(*net.TCPAddr).IP.String()}
}

// listenAll binds the first host on a port of ports (any when none), then
// the others on the same port; if that port is taken on one of them, it
// starts again on another.
func listenAll(hosts []string, ports [][2]int) (*multiListener, error) {
	var lastErr error
	for attempt := 0; attempt < 16; attempt++ {
		first, err := listenIn(net.JoinHostPort(hosts[0], "0"), ports)
		if err != nil {
			return nil, err
		}
		port := strconv.Itoa(first.Addr().(*net.TCPAddr).Port)
		ml := &multiListener{lns: []net.Listener{first}, hosts: []string{hosts[0]}}
		for _, h := range hosts[1:] {
			ln, err := net.Listen("tcp", net.JoinHostPort(h, port))
			if errors.Is(err, syscall.EADDRNOTAVAIL) {
				continue
			}
			if err != nil {
				lastErr = err
				break
			}
			ml.lns = append(ml.lns, ln)
			ml.hosts = append(ml.hosts, h)
		}
		if lastErr == nil {
			ml.start()
			return ml, nil
		}
		for _, ln := range ml.lns {
			ln.Close()
		}
		if !errors.Is(lastErr, syscall.EADDRINUSE) {
			return nil, lastErr
		}
		lastErr = nil
	}
	return nil, fmt.Errorf("no port free on every one of %s", strings.Join(hosts, ", "))
}

// multiListener accepts on several listeners as one.
type multiListener struct {
	lns   []net.Listener
	hosts []string
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func (m *multiListener) start() {
	m.conns, m.done = make(chan net.Conn), make(chan struct{})
	for _, ln := range m.lns {
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					var ne net.Error
					if errors.As(err, &ne) && ne.Timeout() {
						continue
					}
					m.Close() // one gone, all gone: as a single listener would
					return
				}
				select {
				case m.conns <- c:
				case <-m.done:
					c.Close()
					return
				}
			}
		}()
	}
}

func (m *multiListener) Accept() (net.Conn, error) {
	select {
	case c := <-m.conns:
		return c, nil
	case <-m.done:
		return nil, net.ErrClosed
	}
}

func (m *multiListener) Close() error {
	m.once.Do(func() {
		close(m.done)
		for _, ln := range m.lns {
			ln.Close()
		}
	})
	return nil
}

func (m *multiListener) Addr() net.Addr { return m.lns[0].Addr() }
