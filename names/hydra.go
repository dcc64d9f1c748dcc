package names

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// HydraDefaultPort is where hydra_nameserver listens unless told otherwise.
const HydraDefaultPort = 6392

// HydraServer is a client of Hydra's name server (hydra_nameserver, which
// mpiexec -nameserver HOST uses): names published there are found by the
// jobs of other launches, prun's and Hydra's alike. Each request is one TCP
// connection, as Hydra makes them: a count and that many strings, each
// its length (with the NUL) and its bytes, in native 32-bit integers; the
// answer one such string.
type HydraServer struct {
	Addr    string        // host:port
	Timeout time.Duration // per request; 0: 5 s
}

// ParseHydraAddr reads -nameserver's HOST[:PORT].
func ParseHydraAddr(s string) (string, error) {
	host, port := s, strconv.Itoa(HydraDefaultPort)
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
	} else if strings.Count(s, ":") == 1 {
		return "", fmt.Errorf("%q: want HOST or HOST:PORT", s)
	}
	host = strings.Trim(host, "[]")
	n, err := strconv.Atoi(port)
	if host == "" || strings.ContainsAny(host, " \t/[]") || err != nil || n < 1 || n > 65535 ||
		(strings.Contains(host, ":") || strings.HasPrefix(s, "[")) && net.ParseIP(host) == nil {
		return "", fmt.Errorf("%q: want HOST or HOST:PORT", s)
	}
	return net.JoinHostPort(host, port), nil
}

// Publish stores name's value; ErrDuplicate if the server has the name.
// It looks first: hydra_nameserver 4.0 answers a second PUBLISH of a name
// FAILURE yet keeps its value behind the first, to surface once the first
// is unpublished.
func (h HydraServer) Publish(name, value string) error {
	if _, err := h.Lookup(name); err == nil {
		return ErrDuplicate
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	r, err := h.call("PUBLISH", name, value)
	if err != nil {
		return err
	}
	if r != "SUCCESS" {
		return ErrDuplicate
	}
	return nil
}

// Lookup returns name's value, or ErrNotFound.
func (h HydraServer) Lookup(name string) (string, error) {
	r, err := h.call("LOOKUP", name)
	if err != nil {
		return "", err
	}
	if r == "" {
		return "", ErrNotFound
	}
	return r, nil
}

// Unpublish removes name.
func (h HydraServer) Unpublish(name string) error {
	r, err := h.call("UNPUBLISH", name)
	if err != nil {
		return err
	}
	if r != "SUCCESS" {
		return ErrNotFound
	}
	return nil
}

// maxReply bounds an answer: a port name is short.
const maxReply = 1 << 20

func (h HydraServer) call(words ...string) (string, error) {
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	c, err := net.DialTimeout("tcp", h.Addr, timeout)
	if err != nil {
		return "", fmt.Errorf("name server %s: %w", h.Addr, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	var b []byte
	b = binary.NativeEndian.AppendUint32(b, uint32(len(words)))
	for _, w := range words {
		if strings.IndexByte(w, 0) >= 0 {
			return "", fmt.Errorf("name server %s: %q holds a NUL byte", h.Addr, w)
		}
		b = binary.NativeEndian.AppendUint32(b, uint32(len(w)+1))
		b = append(append(b, w...), 0)
	}
	if _, err := c.Write(b); err != nil {
		return "", fmt.Errorf("name server %s: %w", h.Addr, err)
	}
	r := bufio.NewReader(c)
	var n uint32
	if err := binary.Read(r, binary.NativeEndian, &n); err != nil {
		return "", fmt.Errorf("name server %s: no answer: %w", h.Addr, err)
	}
	if n > maxReply {
		return "", fmt.Errorf("name server %s: an answer of %d bytes", h.Addr, n)
	}
	reply := make([]byte, n)
	if _, err := io.ReadFull(r, reply); err != nil {
		return "", fmt.Errorf("name server %s: short answer: %w", h.Addr, err)
	}
	s, _, _ := strings.Cut(string(reply), "\x00")
	return s, nil
}
