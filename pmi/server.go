package pmi

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Versions says which protocol versions a connection may use.
type Versions uint8

const (
	V1 Versions = 1 << iota
	V2
	Both = V1 | V2
)

// RankInfo is what init reports to a rank.
type RankInfo struct {
	Rank, Size, Appnum, UniverseSize int
	Kvsname                          string // the PMI-1 KVS name; the PMI-2 job id
	Spawner                          string // the parent job's id, for spawned jobs
}

// SpawnApp is one command of a spawn request.
type SpawnApp struct {
	Cmd      string
	Argv     []string // arguments after the command
	MaxProcs int
	Info     []Field
}

// SpawnRequest is a whole spawn (PMI-1 mcmd=spawn blocks or PMI-2 spawn).
type SpawnRequest struct {
	Apps   []SpawnApp
	Preput []Field // keys put into the children's KVS before they start
	// Unheard is set for PMI-2 clients: MPICH's ignores the rc of its
	// spawn's response, so a refused spawn would leave it waiting for
	// children that never come.
	Unheard bool
}

// Job is what a rank's PMI connection may ask of its job. Methods that take
// done may call it later, from any goroutine, exactly once.
type Job interface {
	Info(rank int) RankInfo
	Put(rank int, key, value string) error
	Fence(rank int, done func(error)) // PMI-1 barrier, PMI-2 kvs-fence: every rank of the job
	Get(rank int, key string) (string, bool)
	GetByIndex(i int) (key, value string, ok bool)
	JobAttr(key string) (string, bool)
	NodeAttrPut(key, value string)
	NodeAttrGet(key string, wait bool, done func(value string, found bool))
	Publish(rank int, service, port string) error
	Unpublish(rank int, service string) error
	Lookup(service string, done func(port string, found bool))
	Spawn(rank int, req SpawnRequest, done func(jobid string, err error))
	Abort(rank, code int, msg string)
	Connected(rank int) // init/fullinit: the rank uses PMI, so it must finalize
	Finalize(rank int)
	// ProtocolError reports a malformed or out-of-order request; the
	// daemon prints it naming the rank.
	ProtocolError(rank int, err error)
}

// Trace, when set, receives every request and reply (prun sets it from
// PRUN_DEBUG_PMI=1).
var Trace io.Writer

// conn is one rank's PMI connection.
type conn struct {
	rw        io.ReadWriteCloser
	r         *bufio.Reader
	rank      int
	job       Job
	allow     Versions
	version   int // 0 until init
	finalized bool
	// v2seen counts PMI-2 commands read; headerCounted is true for a
	// client that counts the length header into each command's length.
	v2seen        int
	headerCounted bool

	wmu sync.Mutex

	spawn *SpawnRequest // PMI-1 spawn blocks gathered so far
}

// Serve answers one rank's PMI requests until the connection closes or
// breaks the protocol beyond repair. It never panics on client input.
func Serve(rw io.ReadWriteCloser, rank int, job Job, allow Versions) {
	c := &conn{rw: rw, r: bufio.NewReaderSize(rw, 4096), rank: rank, job: job, allow: allow}
	c.serve()
}

// serve answers requests until the connection closes or breaks the
// protocol beyond repair, then closes it.
func (c *conn) serve() {
	job, rank := c.job, c.rank
	defer c.rw.Close()
	for {
		var err error
		if c.version == 2 {
			err = c.serveV2()
		} else {
			err = c.serveV1()
		}
		if err == nil {
			continue
		}
		// A reset is a client that died with our answer unread: its end
		// is reported as such, not as a protocol error.
		if !errors.Is(err, io.EOF) && !errors.Is(err, errClosed) && !errors.Is(err, syscall.ECONNRESET) {
			job.ProtocolError(rank, err)
		}
		return
	}
}

var errClosed = errors.New("connection closed after a fatal protocol error")

func (c *conn) write(s string) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if Trace != nil {
		fmt.Fprintf(Trace, "pmi: rank %d <- %q\n", c.rank, s)
	}
	io.WriteString(c.rw, s) // a client gone away only loses its answer
}

// readLine reads one newline-terminated line of at most maxLine bytes.
func (c *conn) readLine() (string, error) {
	var b []byte
	for {
		part, err := c.r.ReadSlice('\n')
		b = append(b, part...)
		if len(b) > maxLine {
			return "", fmt.Errorf("command longer than %d bytes", maxLine)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if err == io.EOF && len(b) > 0 {
				return "", fmt.Errorf("connection closed inside a command")
			}
			return "", err
		}
		line := strings.TrimRight(string(b), "\r\n")
		if Trace != nil {
			fmt.Fprintf(Trace, "pmi: rank %d -> %q\n", c.rank, line)
		}
		return line, nil
	}
}

func (c *conn) serveV1() error {
	line, err := c.readLine()
	if err != nil {
		return err
	}
	if strings.HasPrefix(line, "mcmd=") {
		return c.multiV1(line)
	}
	cmd, err := ParseV1(line)
	if err != nil {
		c.job.ProtocolError(c.rank, err)
		c.write(FormatV1("error", Field{"rc", "-1"}, Field{"msg", "malformed_command"}))
		return nil
	}
	return c.handleV1(cmd)
}

func ok1() Field { return Field{"rc", "0"} }

// acceptV2 answers a PMI-1 style init that asked for PMI-2: from here on
// the connection speaks PMI-2.
func (c *conn) acceptV2() {
	c.write(FormatV1("response_to_init", Field{"pmi_version", "2"}, Field{"pmi_subversion", "0"}, ok1()))
	c.version = 2
}

// fail1 answers a failed request and reports it when the client is at fault.
func (c *conn) fail1(reply string, err error, fields ...Field) error {
	c.job.ProtocolError(c.rank, err)
	c.write(FormatV1(reply, append([]Field{{"rc", "-1"}, {"msg", strings.ReplaceAll(err.Error(), " ", "_")}}, fields...)...))
	return nil
}

func (c *conn) handleV1(cmd *Command) error {
	if cmd.Name != "init" && c.version == 0 {
		return c.fail1(cmd.Name+"_result", fmt.Errorf("%s before init", cmd.Name))
	}
	if c.finalized && cmd.Name != "finalize" {
		return c.fail1(cmd.Name+"_result", fmt.Errorf("%s after finalize", cmd.Name))
	}
	info := func() RankInfo { return c.job.Info(c.rank) }
	switch cmd.Name {
	case "init":
		v, _ := cmd.Get("pmi_version")
		switch {
		case v == "1" && c.allow&V1 != 0:
			c.version = 1
			c.job.Connected(c.rank)
			c.write(FormatV1("response_to_init", Field{"pmi_version", "1"}, Field{"pmi_subversion", "1"}, ok1()))
		case v == "2" && c.allow&V2 != 0:
			c.job.Connected(c.rank)
			c.acceptV2()
		default:
			return c.fail1("response_to_init", fmt.Errorf("PMI version %q not offered", v),
				Field{"pmi_version", "1"}, Field{"pmi_subversion", "1"})
		}
	case "get_maxes":
		c.write(FormatV1("maxes", ok1(), Field{"kvsname_max", strconv.Itoa(KvsnameMax)},
			Field{"keylen_max", strconv.Itoa(KeylenMax)}, Field{"vallen_max", strconv.Itoa(VallenMax)}))
	case "get_appnum":
		c.write(FormatV1("appnum", Field{"appnum", strconv.Itoa(info().Appnum)}, ok1()))
	case "get_universe_size":
		c.write(FormatV1("universe_size", Field{"size", strconv.Itoa(info().UniverseSize)}, ok1()))
	case "get_my_kvsname":
		c.write(FormatV1("my_kvsname", Field{"kvsname", info().Kvsname}, ok1()))
	case "barrier_in", "put", "get", "getbyidx":
		return c.kvs1(cmd)
	case "publish_name", "unpublish_name", "lookup_name":
		return c.names1(cmd)
	case "abort":
		code, _ := cmd.Int("exitcode")
		msg, _ := cmd.Get("msg")
		c.job.Abort(c.rank, code, msg)
	case "finalize":
		c.finalized = true
		c.job.Finalize(c.rank)
		c.write(FormatV1("finalize_ack", ok1()))
	default:
		return c.fail1(cmd.Name+"_result", fmt.Errorf("unknown PMI-1 command %q", clip(cmd.Name)))
	}
	return nil
}

// kvs1 answers the PMI-1 commands on the job's key-value space.
func (c *conn) kvs1(cmd *Command) error {
	switch cmd.Name {
	case "barrier_in":
		c.job.Fence(c.rank, func(err error) {
			if err != nil {
				c.write(FormatV1("barrier_out", Field{"rc", "-1"}))
				return
			}
			c.write(FormatV1("barrier_out", ok1()))
		})
	case "put":
		key, _ := cmd.Get("key")
		val, _ := cmd.Get("value")
		if err := c.checkKVS(cmd); err != nil {
			return c.fail1("put_result", err)
		}
		if err := checkKV(key, val); err != nil {
			return c.fail1("put_result", err)
		}
		if err := c.job.Put(c.rank, key, val); err != nil {
			return c.fail1("put_result", err)
		}
		c.write(FormatV1("put_result", ok1(), Field{"msg", "success"}))
	case "get":
		key, _ := cmd.Get("key")
		if err := c.checkKVS(cmd); err != nil {
			return c.fail1("get_result", err, Field{"value", "unknown"})
		}
		if v, found := c.job.Get(c.rank, key); found {
			c.write(FormatV1("get_result", ok1(), Field{"msg", "success"}, Field{"value", v}))
		} else {
			// Not a protocol error: MPICH probes optional keys.
			c.write(FormatV1("get_result", Field{"rc", "-1"}, Field{"msg", "key_" + key + "_not_found"}, Field{"value", "unknown"}))
		}
	case "getbyidx":
		idx, err := cmd.Int("idx")
		if err != nil {
			return c.fail1("getbyidx_results", err)
		}
		if k, v, found := c.job.GetByIndex(idx); found {
			c.write(FormatV1("getbyidx_results", ok1(), Field{"nextidx", strconv.Itoa(idx + 1)}, Field{"key", k}, Field{"val", v}))
		} else {
			c.write(FormatV1("getbyidx_results", Field{"rc", "-2"}, Field{"reason", "no_more_keyvals"}))
		}
	}
	return nil
}

// names1 answers PMI-1's name service.
func (c *conn) names1(cmd *Command) error {
	switch cmd.Name {
	case "publish_name":
		svc, _ := cmd.Get("service")
		port, _ := cmd.Get("port")
		if svc == "" {
			return c.fail1("publish_result", errors.New("publish_name without service"))
		}
		if err := c.job.Publish(c.rank, svc, port); err != nil {
			c.write(FormatV1("publish_result", Field{"info", "error"}, Field{"rc", "-1"}))
			return nil
		}
		c.write(FormatV1("publish_result", Field{"info", "ok"}, ok1()))
	case "unpublish_name":
		svc, _ := cmd.Get("service")
		if err := c.job.Unpublish(c.rank, svc); err != nil {
			c.write(FormatV1("unpublish_result", Field{"info", "error"}, Field{"rc", "-1"}))
			return nil
		}
		c.write(FormatV1("unpublish_result", Field{"info", "ok"}, ok1()))
	case "lookup_name":
		svc, _ := cmd.Get("service")
		c.job.Lookup(svc, func(port string, found bool) {
			if !found {
				c.write(FormatV1("lookup_result", Field{"info", "unknown_service"}, Field{"rc", "-1"}))
				return
			}
			c.write(FormatV1("lookup_result", Field{"info", "ok"}, Field{"port", port}, ok1()))
		})
	}
	return nil
}

// checkKVS rejects requests naming another job's KVS.
func (c *conn) checkKVS(cmd *Command) error {
	kvs, ok := cmd.Get("kvsname")
	if ok && kvs != c.job.Info(c.rank).Kvsname {
		return fmt.Errorf("%s: unknown kvsname %q", cmd.Name, clip(kvs))
	}
	return nil
}

func checkKV(key, val string) error {
	switch {
	case key == "":
		return errors.New("put without a key")
	case len(key) > KeylenMax:
		return fmt.Errorf("key of %d bytes exceeds %d", len(key), KeylenMax)
	case len(val) > VallenMax:
		return fmt.Errorf("value of %d bytes exceeds %d", len(val), VallenMax)
	}
	return nil
}

// multiV1 reads a PMI-1 multi-line command (mcmd=spawn ... endcmd). A
// spawn of several commands arrives as several blocks; the reply follows the
// last one (spawnssofar == totspawns).
func (c *conn) multiV1(first string) error {
	lines := []string{first}
	size := len(first)
	for {
		l, err := c.readLine()
		if err != nil {
			return err
		}
		if l == "endcmd" {
			break
		}
		size += len(l)
		if size > maxMulti {
			c.write(FormatV1("spawn_result", Field{"rc", "-1"}))
			return fmt.Errorf("multi-line command longer than %d bytes", maxMulti)
		}
		lines = append(lines, l)
	}
	cmd, err := ParseV1Multi(lines)
	if err != nil {
		return c.fail1("spawn_result", err)
	}
	if c.version == 0 || c.finalized {
		return c.fail1("spawn_result", errors.New("spawn outside init/finalize"))
	}
	if cmd.Name != "spawn" {
		return c.fail1("spawn_result", fmt.Errorf("unknown multi-line command %q", clip(cmd.Name)))
	}
	app, preput, err := parseSpawnV1(cmd)
	if err != nil {
		c.spawn = nil
		return c.fail1("spawn_result", err)
	}
	if c.spawn == nil {
		c.spawn = &SpawnRequest{}
	}
	c.spawn.Apps = append(c.spawn.Apps, app)
	c.spawn.Preput = append(c.spawn.Preput, preput...)
	tot, _ := cmd.Int("totspawns")
	sofar, _ := cmd.Int("spawnssofar")
	if sofar < tot {
		return nil // more blocks follow before the single reply
	}
	req := *c.spawn
	c.spawn = nil
	c.job.Spawn(c.rank, req, func(jobid string, err error) {
		if err != nil {
			c.write(FormatV1("spawn_result", Field{"rc", "-1"}, Field{"msg", strings.ReplaceAll(err.Error(), " ", "_")}))
			return
		}
		c.write(FormatV1("spawn_result", ok1()))
	})
	return nil
}

func parseSpawnV1(cmd *Command) (SpawnApp, []Field, error) {
	var app SpawnApp
	var err error
	if app.MaxProcs, err = cmd.Int("nprocs"); err != nil {
		return app, nil, err
	}
	if app.MaxProcs == 0 {
		return app, nil, errors.New("spawn of 0 processes")
	}
	app.Cmd, _ = cmd.Get("execname")
	if app.Cmd == "" {
		return app, nil, errors.New("spawn without execname")
	}
	argc, err := cmd.Int("argcnt")
	if err != nil {
		return app, nil, err
	}
	for i := 1; i <= argc; i++ {
		a, ok := cmd.Get("arg" + strconv.Itoa(i))
		if !ok {
			return app, nil, fmt.Errorf("spawn: arg%d missing", i)
		}
		app.Argv = append(app.Argv, a)
	}
	pre, err := indexedPairs(cmd, "preput_num", "preput_key_", "preput_val_", 0)
	if err != nil {
		return app, nil, err
	}
	if app.Info, err = indexedPairs(cmd, "info_num", "info_key_", "info_val_", 0); err != nil {
		return app, nil, err
	}
	return app, pre, nil
}

// indexedPairs collects count-prefixed key/value fields (preput_key_0, ...).
func indexedPairs(cmd *Command, countKey, keyPre, valPre string, base int) ([]Field, error) {
	n := 0
	if _, ok := cmd.Get(countKey); ok {
		var err error
		if n, err = cmd.Int(countKey); err != nil {
			return nil, err
		}
	}
	if n > 4096 {
		return nil, fmt.Errorf("%s=%d is too many", countKey, n)
	}
	var out []Field
	for i := base; i < base+n; i++ {
		k, ok1 := cmd.Get(keyPre + strconv.Itoa(i))
		v, ok2 := cmd.Get(valPre + strconv.Itoa(i))
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("%s%d or %s%d missing", keyPre, i, valPre, i)
		}
		out = append(out, Field{k, v})
	}
	return out, nil
}
