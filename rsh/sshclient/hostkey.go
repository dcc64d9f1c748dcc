package sshclient

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// hostKeys checks a server's host key against the known_hosts files of one
// target, as StrictHostKeyChecking says.
type hostKeys struct {
	t     *target
	files []string // the known_hosts files that exist
	cb    ssh.HostKeyCallback
	certs bool // some file has a @cert-authority line

	mu  sync.Mutex
	ok  bool  // the key was accepted
	err error // why the key was refused, for the caller's message
}

// result says whether the key was accepted, or why not.
func (h *hostKeys) result() (error, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err, h.ok
}

func newHostKeys(t *target) (*hostKeys, error) {
	h := &hostKeys{t: t}
	if t.strict == "no" {
		return h, nil
	}
	if err := h.load(); err != nil {
		return nil, err
	}
	return h, nil
}

// load (re)reads the known_hosts files.
func (h *hostKeys) load() error {
	h.files, h.cb, h.certs = nil, nil, false
	for _, f := range slices.Concat(h.t.userKnown, h.t.globalKnown) {
		b, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("cannot read %s: %v", f, unwrapPath(err))
		}
		h.files = append(h.files, f)
		if strings.Contains(string(b), "@cert-authority") {
			h.certs = true
		}
	}
	if len(h.files) == 0 {
		return nil
	}
	cb, err := knownhosts.New(h.files...)
	if err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "knownhosts: "))
	}
	h.cb = cb
	return nil
}

// lookup checks key against the files: nil when it is known, or a
// *knownhosts.KeyError (unknown: no Want; mismatch), or another error.
func (h *hostKeys) lookup(remote net.Addr, key ssh.PublicKey) error {
	if h.cb == nil {
		return &knownhosts.KeyError{}
	}
	return h.cb(h.t.knownHostsAddr(), remote, key)
}

// probeKey is a key that is in no known_hosts file.
var probeKey = sync.OnceValue(func() ssh.PublicKey {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil
	}
	return k
})

// algorithms is the host key algorithms to offer, in order: those of the
// keys known for the host first. The client's order decides which of its
// keys a server shows, and the library's default order puts ECDSA and RSA
// before ed25519: a host known by its ed25519 key would show another one and
// fail as a mismatch. nil means the library's default.
func (h *hostKeys) algorithms() []string {
	var known []string
	if h.cb != nil && probeKey() != nil {
		port, _ := strconv.Atoi(h.t.port)
		var ke *knownhosts.KeyError
		if err := h.lookup(&net.TCPAddr{IP: net.IPv4zero, Port: port}, probeKey()); errors.As(err, &ke) {
			for _, w := range ke.Want {
				known = append(known, keyAlgorithms(w.Key.Type())...)
			}
		}
	}
	if len(known) == 0 && h.certs {
		return nil
	}
	algs := slices.Clone(known)
	for _, a := range ssh.SupportedAlgorithms().HostKeys {
		if strings.Contains(a, "-cert-") && !h.certs {
			// Without a known CA a certificate cannot be checked: ask
			// for the plain key.
			continue
		}
		algs = append(algs, a)
	}
	return dedupe(algs)
}

// keyAlgorithms are the signature algorithms for a key type.
func keyAlgorithms(keyType string) []string {
	if keyType == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256}
	}
	return []string{keyType}
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	out := s[:0]
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// check is the ssh.HostKeyCallback.
func (h *hostKeys) check(_ string, remote net.Addr, key ssh.PublicKey) error {
	if h.t.strict == "no" {
		h.mu.Lock()
		h.ok = true
		h.mu.Unlock()
		return nil
	}
	err := h.verdict(h.lookup(remote, key), key)
	if errors.Is(err, errUnknown) {
		if h.t.strict == "accept-new" {
			err = h.accept(remote, key)
		} else {
			err = h.unknownError()
		}
	}
	h.mu.Lock()
	h.ok, h.err = err == nil, err
	h.mu.Unlock()
	return err
}

var errUnknown = errors.New("host key is not known")

// verdict turns a lookup result into our error.
func (h *hostKeys) verdict(err error, key ssh.PublicKey) error {
	var ke *knownhosts.KeyError
	var re *knownhosts.RevokedError
	name := knownhosts.Normalize(h.t.knownHostsAddr())
	switch {
	case err == nil:
		return nil
	case errors.As(err, &re):
		return fmt.Errorf("host key of %s is revoked in %s line %d", name, re.Revoked.Filename, re.Revoked.Line)
	case errors.As(err, &ke) && len(ke.Want) == 0:
		return errUnknown
	case errors.As(err, &ke):
		w := ke.Want[0]
		for _, k := range ke.Want {
			if k.Key.Type() == key.Type() {
				w = k
				break
			}
		}
		return fmt.Errorf("host key mismatch for %s in %s line %d (the server's %s key is %s)",
			name, w.Filename, w.Line, key.Type(), ssh.FingerprintSHA256(key))
	default:
		return fmt.Errorf("cannot check the host key of %s: %v", name, err)
	}
}

// unknownError is the message for a host key in no file.
func (h *hostKeys) unknownError() error {
	where := slices.Clone(h.t.userKnown)
	for _, f := range h.files {
		if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() && !slices.Contains(where, f) {
			where = append(where, f)
		}
	}
	in := "no known_hosts file (UserKnownHostsFile none)"
	if len(where) > 0 {
		in = "not in " + strings.Join(where, ", ")
	}
	return fmt.Errorf("host key is not known (%s); add it, or set StrictHostKeyChecking accept-new", in)
}

// acceptMu serializes additions to known_hosts files in this process.
var acceptMu sync.Mutex

// accept adds an unknown key to the first UserKnownHostsFile. The files are
// read again first: a concurrent Start may have added the host meanwhile.
func (h *hostKeys) accept(remote net.Addr, key ssh.PublicKey) error {
	acceptMu.Lock()
	defer acceptMu.Unlock()
	if err := h.load(); err != nil {
		return err
	}
	if err := h.verdict(h.lookup(remote, key), key); !errors.Is(err, errUnknown) {
		return err
	}
	if len(h.t.userKnown) == 0 {
		return nil // nowhere to remember it (UserKnownHostsFile none)
	}
	file := h.t.userKnown[0]
	name := knownhosts.Normalize(h.t.knownHostsAddr())
	if h.t.hashKnown {
		name = knownhosts.HashHostname(name)
	}
	line := knownhosts.Line([]string{name}, key) + "\n"
	if lastByte(file) != '\n' {
		line = "\n" + line
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return fmt.Errorf("cannot add the host key to %s: %v", file, unwrapPath(err))
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("cannot add the host key to %s: %v", file, unwrapPath(err))
	}
	_, err = f.WriteString(line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("cannot add the host key to %s: %v", file, unwrapPath(err))
	}
	return nil
}
