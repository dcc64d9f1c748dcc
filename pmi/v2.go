package pmi

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// readV2 reads one PMI-2 command: a 6-byte decimal length, then the body.
func (c *conn) readV2() (string, error) {
	var hdr [6]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return "", errors.New("connection closed inside a PMI-2 length header")
		}
		return "", err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(hdr[:])))
	if err != nil || n <= 0 || n > maxLine {
		return "", fmt.Errorf("bad PMI-2 length header %q", string(hdr[:]))
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c.r, body); err != nil {
		return "", errors.New("connection closed inside a PMI-2 command")
	}
	if Trace != nil {
		fmt.Fprintf(Trace, "pmi: rank %d -> %q\n", c.rank, body)
	}
	if c.v2seen++; c.v2seen == 1 {
		c.headerCounted = countsHeader(string(body))
	}
	if c.headerCounted {
		if len(body) <= 6 {
			return "", fmt.Errorf("PMI-2 command of %d bytes from a client that counts the header into the length", len(body))
		}
		body = body[:len(body)-6]
	}
	return string(body), nil
}

// countsHeader tells, from its first command (fullinit), a client that
// counts the 6-byte length header into every command's length, as MPICH's
// simple PMI-2 client does (MPICH 4.0, and clients copied from it): 6 bytes
// of stale buffer then follow each command (Hydra's parser skips them as
// fields without '=' or as empty ones). That fullinit ends with its threaded
// field 6 bytes before the length given, and those 6 bytes are not a field
// of their own ("key=v;"), as they would be from a client that counts right.
func countsHeader(body string) bool {
	if len(body) <= 6 {
		return false
	}
	head, tail := body[:len(body)-6], body[len(body)-6:]
	if !strings.HasPrefix(head, "cmd=fullinit;") ||
		!(strings.HasSuffix(head, ";threaded=FALSE;") || strings.HasSuffix(head, ";threaded=TRUE;")) {
		return false
	}
	field := strings.HasSuffix(tail, ";") && strings.IndexByte(tail, '=') > 0 && strings.Count(tail, ";") == 1
	return !field
}

func ok2() Field { return Field{"rc", "0"} }

func (c *conn) fail2(reply string, err error, fields ...Field) error {
	c.job.ProtocolError(c.rank, err)
	c.write(FormatV2(reply, append(fields, Field{"rc", "-1"}, Field{"errmsg", err.Error()})...))
	return nil
}

func boolV2(b bool) string {
	if b {
		return "TRUE"
	}
	return "FALSE"
}

// serveV2 handles one PMI-2 command. A framing error ends the connection:
// there is no way to find the next command's start.
func (c *conn) serveV2() error {
	body, err := c.readV2()
	if err != nil {
		return err
	}
	cmd, err := ParseV2(body)
	if err != nil {
		c.job.ProtocolError(c.rank, err)
		c.write(FormatV2("error", Field{"rc", "-1"}, Field{"errmsg", "malformed command"}))
		return nil
	}
	return c.handleV2(cmd)
}

func (c *conn) handleV2(cmd *Command) error {
	reply := cmd.Name + "-response"
	if c.finalized && cmd.Name != "finalize" {
		return c.fail2(reply, fmt.Errorf("%s after finalize", cmd.Name))
	}
	info := c.job.Info(c.rank)
	switch cmd.Name {
	case "fullinit":
		fields := []Field{{"pmi-version", "2"}, {"pmi-subversion", "0"},
			{"rank", strconv.Itoa(info.Rank)}, {"size", strconv.Itoa(info.Size)}, {"appnum", strconv.Itoa(info.Appnum)}}
		if info.Spawner != "" {
			// MPICH's client takes the key's presence, empty or not, for
			// "I was spawned" and then looks for a parent to connect to.
			fields = append(fields, Field{"spawner-jobid", info.Spawner})
		}
		c.write(FormatV2(reply, append(fields, Field{"debugged", "FALSE"}, Field{"pmiverbose", "FALSE"}, ok2())...))
	case "job-getid":
		c.write(FormatV2(reply, Field{"jobid", info.Kvsname}, ok2()))
	case "job-connect":
		c.write(FormatV2(reply, Field{"kvscopy", "FALSE"}, ok2()))
	case "job-disconnect":
		c.write(FormatV2(reply, ok2()))
	case "kvs-put", "kvs-fence", "kvs-get", "info-putnodeattr", "info-getnodeattr", "info-getjobattr":
		return c.kvs2(cmd, reply, info)
	case "name-publish", "name-unpublish", "name-lookup":
		return c.names2(cmd, reply)
	case "spawn":
		return c.spawn2(cmd, reply)
	case "abort":
		msg, _ := cmd.Get("msg")
		c.job.Abort(c.rank, abortCode(msg), msg)
	case "finalize":
		c.finalized = true
		c.job.Finalize(c.rank)
		c.write(FormatV2(reply, ok2()))
	default:
		return c.fail2(reply, fmt.Errorf("unknown PMI-2 command %q", clip(cmd.Name)))
	}
	return nil
}

// kvs2 answers the PMI-2 commands on the job's key-value space and the
// node's and job's attributes.
func (c *conn) kvs2(cmd *Command, reply string, info RankInfo) error {
	switch cmd.Name {
	case "kvs-put":
		key, _ := cmd.Get("key")
		val, _ := cmd.Get("value")
		if err := checkKV(key, val); err != nil {
			return c.fail2(reply, err)
		}
		if err := c.job.Put(c.rank, key, val); err != nil {
			return c.fail2(reply, err)
		}
		c.write(FormatV2(reply, ok2()))
	case "kvs-fence":
		c.job.Fence(c.rank, func(err error) {
			if err != nil {
				c.write(FormatV2(reply, Field{"rc", "-1"}, Field{"errmsg", err.Error()}))
				return
			}
			c.write(FormatV2(reply, ok2()))
		})
	case "kvs-get":
		key, _ := cmd.Get("key")
		if jobid, ok := cmd.Get("jobid"); ok && jobid != "" && jobid != info.Kvsname {
			c.write(FormatV2(reply, Field{"found", "FALSE"}, ok2()))
			return nil
		}
		v, found := c.job.Get(c.rank, key)
		c.write(FormatV2(reply, Field{"found", boolV2(found)}, Field{"value", v}, ok2()))
	case "info-putnodeattr":
		key, _ := cmd.Get("key")
		val, _ := cmd.Get("value")
		if err := checkKV(key, val); err != nil {
			return c.fail2(reply, err)
		}
		c.job.NodeAttrPut(key, val)
		c.write(FormatV2(reply, ok2()))
	case "info-getnodeattr":
		key, _ := cmd.Get("key")
		wait, _ := cmd.Get("wait")
		c.job.NodeAttrGet(key, strings.EqualFold(wait, "TRUE"), func(v string, found bool) {
			c.write(FormatV2(reply, Field{"found", boolV2(found)}, Field{"value", v}, ok2()))
		})
	case "info-getjobattr":
		key, _ := cmd.Get("key")
		v, found := c.job.JobAttr(key)
		c.write(FormatV2(reply, Field{"found", boolV2(found)}, Field{"value", v}, ok2()))
	}
	return nil
}

// names2 answers PMI-2's name service.
func (c *conn) names2(cmd *Command, reply string) error {
	switch cmd.Name {
	case "name-publish":
		name, _ := cmd.Get("name")
		port, _ := cmd.Get("port")
		if name == "" {
			return c.fail2(reply, errors.New("name-publish without name"))
		}
		if err := c.job.Publish(c.rank, name, port); err != nil {
			c.write(FormatV2(reply, Field{"rc", "-1"}, Field{"errmsg", err.Error()}))
			return nil
		}
		c.write(FormatV2(reply, ok2()))
	case "name-unpublish":
		name, _ := cmd.Get("name")
		if err := c.job.Unpublish(c.rank, name); err != nil {
			c.write(FormatV2(reply, Field{"rc", "-1"}, Field{"errmsg", err.Error()}))
			return nil
		}
		c.write(FormatV2(reply, ok2()))
	case "name-lookup":
		name, _ := cmd.Get("name")
		c.job.Lookup(name, func(port string, found bool) {
			if !found {
				c.write(FormatV2(reply, Field{"found", "FALSE"}, Field{"rc", "-1"}, Field{"errmsg", "name not published"}))
				return
			}
			// "port", as MPICH's client reads it and Hydra answers.
			c.write(FormatV2(reply, Field{"port", port}, Field{"found", "TRUE"}, ok2()))
		})
	}
	return nil
}

// spawn2 answers PMI-2's spawn once the job has started, or failed.
func (c *conn) spawn2(cmd *Command, reply string) error {
	req, err := parseSpawnV2(cmd)
	if err != nil {
		return c.fail2(reply, err)
	}
	req.Unheard = true
	c.job.Spawn(c.rank, req, func(jobid string, err error) {
		if err != nil {
			c.write(FormatV2(reply, Field{"rc", "-1"}, Field{"errmsg", err.Error()}))
			return
		}
		codes := make([]string, 0)
		for _, a := range req.Apps {
			for i := 0; i < a.MaxProcs; i++ {
				codes = append(codes, "0")
			}
		}
		c.write(FormatV2(reply, ok2(), Field{"jobid", jobid}, Field{"errcodes", strings.Join(codes, ",")}))
	})
	return nil
}

// abortCode is the status of a PMI-2 abort, whose command has no field for
// it (MPICH's client then exits 255): MPI_Abort's code from MPICH's message,
// "application called MPI_Abort(MPI_COMM_WORLD, 17) - process 1", as a
// PMI-1 abort or mpirun would give it, else 1. (No regexp: its package
// would add to every prun's start.)
func abortCode(msg string) int {
	_, rest, ok := strings.Cut(msg, "MPI_Abort(")
	if !ok {
		return 1
	}
	args, _, ok := strings.Cut(rest, ")")
	i := strings.LastIndex(args, ", ")
	if !ok || i < 0 || strings.ContainsAny(args[:i], ",(") {
		return 1
	}
	n, err := strconv.Atoi(args[i+2:])
	if err != nil {
		return 1
	}
	return n
}

// parseSpawnV2 reads "spawn;ncmds=N;subcmd=CMD;maxprocs=M;argc=A;argv0=..;
// infokeycount=K;infokey0=..;infoval0=..;...;preputcount=P;ppkey0=..;ppval0=..".
// Each subcmd starts a new app; the fields after it belong to it.
func parseSpawnV2(cmd *Command) (SpawnRequest, error) {
	var req SpawnRequest
	ncmds, err := cmd.Int("ncmds")
	if err != nil {
		return req, err
	}
	if ncmds == 0 || ncmds > 1024 {
		return req, fmt.Errorf("spawn: ncmds=%d", ncmds)
	}
	// Split the fields into per-app groups at each subcmd.
	var groups []*Command
	head := &Command{Name: "spawn"}
	for _, f := range cmd.Fields {
		if f.Key == "subcmd" {
			groups = append(groups, &Command{Name: "spawn"})
		}
		if len(groups) == 0 {
			head.Fields = append(head.Fields, f)
			continue
		}
		groups[len(groups)-1].Fields = append(groups[len(groups)-1].Fields, f)
	}
	if len(groups) != ncmds {
		return req, fmt.Errorf("spawn: ncmds=%d but %d subcmds", ncmds, len(groups))
	}
	for _, g := range groups {
		var app SpawnApp
		app.Cmd, _ = g.Get("subcmd")
		if app.MaxProcs, err = g.Int("maxprocs"); err != nil {
			return req, err
		}
		if app.MaxProcs == 0 {
			return req, errors.New("spawn of 0 processes")
		}
		argc, err := g.Int("argc")
		if err != nil {
			return req, err
		}
		for i := 0; i < argc; i++ {
			a, ok := g.Get("argv" + strconv.Itoa(i))
			if !ok {
				return req, fmt.Errorf("spawn: argv%d missing", i)
			}
			app.Argv = append(app.Argv, a)
		}
		if app.Info, err = indexedPairs(g, "infokeycount", "infokey", "infoval", 0); err != nil {
			return req, err
		}
		req.Apps = append(req.Apps, app)
	}
	all := &Command{Fields: cmd.Fields}
	if req.Preput, err = indexedPairs(all, "preputcount", "ppkey", "ppval", 0); err != nil {
		return req, err
	}
	return req, nil
}
