package sshclient

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kevinburke/ssh_config"
)

// systemConfig is OpenSSH's system-wide client configuration.
const systemConfig = "/etc/ssh/ssh_config"

// configFile is one parsed ssh_config file.
type configFile struct {
	path string
	cfg  *ssh_config.Config
}

// configs are the client configuration files in the order OpenSSH reads
// them; for most keywords the first value found wins.
type configs []configFile

// loadConfigs reads home/.ssh/config and the system configuration. A missing
// file is skipped; one that does not parse is an error naming it.
func loadConfigs(home string) (configs, error) {
	var cs configs
	for _, p := range []string{filepath.Join(home, ".ssh", "config"), systemConfig} {
		cfg, err := parsedConfigs.load(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		cs = append(cs, configFile{p, cfg})
	}
	return cs, nil
}

// parsedConfigs keeps each configuration file as parsed, for as long as the
// file keeps its size and modification time. Every session of a launch
// reads the same files, and parsing compiles a regexp per Host pattern:
// with a Host block per node, parsing per session made a launch's SSH work
// grow with nodes times blocks. An edited file is read again; the
// files it includes are read when it is. A parsed Config is only read
// afterwards (its Includes lock their own state), so sessions share it.
var parsedConfigs = configCache{m: map[string]cachedConfig{}}

type configCache struct {
	mu sync.Mutex
	m  map[string]cachedConfig
}

type cachedConfig struct {
	size int64
	mod  time.Time
	cfg  *ssh_config.Config
}

// load returns path parsed; an error wrapping os.ErrNotExist when it is
// missing, else one naming it.
func (c *configCache) load(path string) (*ssh_config.Config, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err == nil {
		c.mu.Lock()
		e, ok := c.m[path]
		c.mu.Unlock()
		if ok && e.size == fi.Size() && e.mod.Equal(fi.ModTime()) {
			return e.cfg, nil
		}
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %v", path, unwrapPath(err))
	}
	cfg, err := decodeConfig(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if fi != nil {
		c.mu.Lock()
		c.m[path] = cachedConfig{fi.Size(), fi.ModTime(), cfg}
		c.mu.Unlock()
	}
	return cfg, nil
}

// decodeConfig parses b, turning any panic of the parser into an error.
func decodeConfig(b []byte) (cfg *ssh_config.Config, err error) {
	defer func() {
		if r := recover(); r != nil {
			cfg, err = nil, fmt.Errorf("cannot parse: %v", r)
		}
	}()
	cfg, err = ssh_config.DecodeBytes(b)
	if err == nil && cfg == nil {
		err = errors.New("cannot parse")
	}
	if err != nil {
		// The parser says "(LINE, COL): ssh_config: MESSAGE".
		msg := err.Error()
		if pos, rest, ok := strings.Cut(strings.TrimPrefix(msg, "("), "): "); ok && strings.HasPrefix(msg, "(") {
			line, _, _ := strings.Cut(pos, ",")
			msg = "line " + line + ": " + strings.TrimPrefix(rest, "ssh_config: ")
		}
		err = errors.New(msg)
	}
	return cfg, err
}

// get is the first value of key for the host alias, or "".
func (cs configs) get(alias, key string) (string, error) {
	for _, c := range cs {
		v, err := c.cfg.Get(alias, key)
		if err != nil {
			return "", fmt.Errorf("%s: %v", c.path, err)
		}
		if v != "" {
			return v, nil
		}
	}
	return "", nil
}

// getAll is every value of key for the host alias, in order.
func (cs configs) getAll(alias, key string) ([]string, error) {
	var all []string
	for _, c := range cs {
		v, err := c.cfg.GetAll(alias, key)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", c.path, err)
		}
		all = append(all, v...)
	}
	return all, nil
}

// target is how to reach one host (the node, or a jump host on the way).
type target struct {
	alias    string // the name as given, which Host patterns match
	hostname string // HostName, where to connect
	port     string
	user     string

	identities     []string
	explicitIDs    bool // IdentityFile was given (else the defaults, when present)
	identitiesOnly bool
	agent          string // ssh-agent socket, "" for none

	strict       string // "yes", "no" or "accept-new"
	userKnown    []string
	globalKnown  []string
	hostKeyAlias string
	hashKnown    bool

	timeout  time.Duration // ConnectTimeout, 0 when not set
	alive    time.Duration // ServerAliveInterval, 0 = off
	aliveMax int

	jump string // ProxyJump: "" for none
}

// addr is where to connect, host:port.
func (t *target) addr() string { return joinHostPort(t.hostname, t.port) }

// knownHostsAddr is the name under which the host key is looked up.
func (t *target) knownHostsAddr() string {
	if t.hostKeyAlias != "" {
		return joinHostPort(t.hostKeyAlias, t.port)
	}
	return t.addr()
}

func joinHostPort(h, p string) string {
	return net.JoinHostPort(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), p)
}

// resolve reads the configuration of alias. user and port, when not
// empty, override the configuration (as in a ProxyJump user@host:port).
func (cs configs) resolve(alias, user, port, home string) (*target, error) {
	t := &target{alias: alias}
	if _, err := cs.get(alias, "HostName"); err != nil {
		return nil, err
	}
	h := &hostConfig{cs: cs, alias: alias, home: home}
	if err := h.address(t, user, port); err != nil {
		return nil, err
	}
	h.tok = map[byte]string{
		'h': t.hostname, 'n': alias, 'p': t.port, 'r': t.user,
		'u': localUser(), 'd': home, 'i': strconv.Itoa(os.Getuid()),
	}
	h.identities(t)
	if err := h.hostKeys(t); err != nil {
		return nil, err
	}
	if err := h.timeouts(t); err != nil {
		return nil, err
	}

	// ProxyJump and ProxyCommand: the first one given wins; we can only do
	// the former in-process.
	jump, cmd := h.get("ProxyJump"), h.get("ProxyCommand")
	switch {
	case jump != "" && !strings.EqualFold(jump, "none"):
		t.jump = jump
	case jump == "" && cmd != "" && !strings.EqualFold(cmd, "none"):
		return nil, fmt.Errorf("ProxyCommand (for %s) is not supported by the built-in SSH client; use ProxyJump, or an external remote shell command (--rsh ssh)", alias)
	}
	return t, nil
}

// hostConfig is the configuration of one host alias as resolve reads it.
type hostConfig struct {
	cs    configs
	alias string
	home  string
	tok   map[byte]string // the tokens of paths (%h, %d...), once the address is known
}

// get is the value of key for the alias, trimmed; "" when not set.
func (h *hostConfig) get(key string) string {
	v, _ := h.cs.get(h.alias, key) // errors are caught by resolve's first call
	return strings.TrimSpace(v)
}

// path is a file name of the configuration, its tokens and ~ expanded.
func (h *hostConfig) path(p string) string { return expandPath(expandTokens(p, h.tok), h.home) }

// address sets the host name, port and user of t.
func (h *hostConfig) address(t *target, user, port string) error {
	alias := h.alias
	t.hostname = alias
	if v := h.get("HostName"); v != "" {
		t.hostname = expandTokens(v, map[byte]string{'h': alias})
	}
	t.port = port
	if t.port == "" {
		t.port = h.get("Port")
	}
	if t.port == "" {
		t.port = "22"
	}
	if n, err := strconv.Atoi(t.port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("bad port %q for %s", t.port, alias)
	}
	t.user = user
	if t.user == "" {
		t.user = h.get("User")
	}
	if t.user == "" {
		t.user = localUser()
	}
	return nil
}

// identities sets the keys t authenticates with, and its agent.
func (h *hostConfig) identities(t *target) {
	ids, _ := h.cs.getAll(h.alias, "IdentityFile")
	for _, id := range ids {
		if id = strings.TrimSpace(id); id != "" && !strings.EqualFold(id, "none") {
			t.identities = append(t.identities, h.path(id))
			t.explicitIDs = true
		}
	}
	if !t.explicitIDs {
		for _, n := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
			t.identities = append(t.identities, filepath.Join(h.home, ".ssh", n))
		}
	}
	t.identitiesOnly = yes(h.get("IdentitiesOnly"))
	switch a := h.get("IdentityAgent"); {
	case strings.EqualFold(a, "none"):
	case a == "" || a == "SSH_AUTH_SOCK":
		t.agent = os.Getenv("SSH_AUTH_SOCK")
	case strings.HasPrefix(a, "$"):
		t.agent = os.Getenv(strings.Trim(a[1:], "{}"))
	default:
		t.agent = h.path(a)
	}
}

// hostKeys sets how t checks the server's host key, and against which files.
func (h *hostConfig) hostKeys(t *target) error {
	switch s := strings.ToLower(h.get("StrictHostKeyChecking")); s {
	case "", "ask", "yes", "true":
		t.strict = "yes"
	case "no", "off", "false":
		t.strict = "no"
	case "accept-new":
		t.strict = s
	default:
		return fmt.Errorf("bad StrictHostKeyChecking %q for %s", s, h.alias)
	}
	files := func(key, def string) []string {
		v := h.get(key)
		if v == "" {
			v = def
		}
		if strings.EqualFold(v, "none") {
			return nil
		}
		var fs []string
		for _, f := range strings.Fields(v) {
			fs = append(fs, h.path(f))
		}
		return fs
	}
	t.userKnown = files("UserKnownHostsFile", "~/.ssh/known_hosts ~/.ssh/known_hosts2")
	t.globalKnown = files("GlobalKnownHostsFile", "/etc/ssh/ssh_known_hosts /etc/ssh/ssh_known_hosts2")
	t.hostKeyAlias = h.get("HostKeyAlias")
	t.hashKnown = yes(h.get("HashKnownHosts"))
	return nil
}

// timeouts sets t's connect timeout and keepalives.
func (h *hostConfig) timeouts(t *target) error {
	alias := h.alias
	var err error
	if t.timeout, err = seconds(h.get("ConnectTimeout"), "ConnectTimeout", alias); err != nil {
		return err
	}
	if t.alive, err = seconds(h.get("ServerAliveInterval"), "ServerAliveInterval", alias); err != nil {
		return err
	}
	t.aliveMax = 3
	if v := h.get("ServerAliveCountMax"); v != "" {
		if t.aliveMax, err = strconv.Atoi(v); err != nil || t.aliveMax < 1 {
			return fmt.Errorf("bad ServerAliveCountMax %q for %s", v, alias)
		}
	}
	return nil
}

// maxHops bounds ProxyJump chains (which may loop through the configuration).
const maxHops = 10

// route is the chain of hosts to connect through to reach alias, alias last.
// jump, when not nil, replaces alias's ProxyJump (as ssh -J does).
func (cs configs) route(alias, user, port string, jump *string, home string, depth int) ([]*target, error) {
	if depth > maxHops {
		return nil, fmt.Errorf("ProxyJump chain longer than %d hosts (a loop in ssh_config?)", maxHops)
	}
	t, err := cs.resolve(alias, user, port, home)
	if err != nil {
		return nil, err
	}
	if jump != nil {
		t.jump = *jump
	}
	if t.jump == "" {
		return []*target{t}, nil
	}
	hops := strings.Split(t.jump, ",")
	last := strings.TrimSpace(hops[len(hops)-1])
	ju, jh, jp, err := parseJump(last)
	if err != nil {
		return nil, fmt.Errorf("bad ProxyJump %q for %s: %v", t.jump, alias, err)
	}
	if len(hops) == 1 && jh == alias {
		// A "Host *" ProxyJump also matches the jump host: ssh ignores it
		// there rather than jumping through the host to itself.
		t.jump = ""
		return []*target{t}, nil
	}
	var rest *string
	if len(hops) > 1 {
		r := strings.Join(hops[:len(hops)-1], ",")
		rest = &r
	}
	chain, err := cs.route(jh, ju, jp, rest, home, depth+1)
	if err != nil {
		return nil, err
	}
	return append(chain, t), nil
}

// parseJump splits a ProxyJump hop, [ssh://][user@]host[:port].
func parseJump(s string) (user, host, port string, err error) {
	s = strings.TrimPrefix(s, "ssh://")
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		user, s = s[:i], s[i+1:]
	}
	host = s
	if strings.HasPrefix(s, "[") {
		i := strings.IndexByte(s, ']')
		if i < 0 {
			return "", "", "", errors.New("missing ]")
		}
		host, s = s[1:i], s[i+1:]
		if s != "" && !strings.HasPrefix(s, ":") {
			return "", "", "", errors.New("junk after ]")
		}
		port = strings.TrimPrefix(s, ":")
	} else if i := strings.LastIndexByte(s, ':'); i >= 0 && strings.Count(s, ":") == 1 {
		host, port = s[:i], s[i+1:]
	}
	if host == "" || strings.HasPrefix(host, "-") || strings.ContainsAny(host, " \t/") {
		return "", "", "", errors.New("no host")
	}
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return "", "", "", fmt.Errorf("bad port %q", port)
		}
	}
	return user, host, port, nil
}

// expandTokens replaces %X for the X in tok, and %% by %; other tokens stay.
func expandTokens(s string, tok map[byte]string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+1 < len(s) {
			if s[i+1] == '%' {
				b.WriteByte('%')
				i++
				continue
			}
			if v, ok := tok[s[i+1]]; ok {
				b.WriteString(v)
				i++
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// expandPath expands a leading ~ to home.
func expandPath(p, home string) string {
	if p == "~" {
		return home
	}
	if strings.HasPrefix(p, "~/") {
		return filepath.Join(home, p[2:])
	}
	return p
}

func yes(v string) bool {
	switch strings.ToLower(v) {
	case "yes", "true":
		return true
	}
	return false
}

// seconds parses an ssh_config time in seconds ("" = 0).
func seconds(v, key, alias string) (time.Duration, error) {
	if v == "" || strings.EqualFold(v, "none") {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad %s %q for %s", key, v, alias)
	}
	return time.Duration(n) * time.Second, nil
}

// localUser is the name of the user running us.
var localUser = sync.OnceValue(func() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return strconv.Itoa(os.Getuid())
})

// homeDir is opts.Home, else $HOME, else the password database's.
func homeDir(home string) string {
	if home != "" {
		return home
	}
	if h := os.Getenv("HOME"); h != "" {
		return h
	}
	if u, err := user.Current(); err == nil {
		return u.HomeDir
	}
	return "/"
}

// unwrapPath drops the operation and path of a *os.PathError, which the
// caller's message already names.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// lastByte is the last byte of file p, or '\n' when it is empty or missing.
func lastByte(p string) byte {
	f, err := os.Open(p)
	if err != nil {
		return '\n'
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return '\n'
	}
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, fi.Size()-1); err != nil {
		return '\n'
	}
	return b[0]
}
