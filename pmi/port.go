package pmi

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
)

// ServeNamedV2 serves a PMI-2 client that reached a PMI port (Hydra's
// -pmi-port) rather than inheriting its connection, and so names its rank
// in its fullinit, "pmiid=N" (or "pmirank=N"), as MPICH's PMI-2 client does
// with PMI_ID set. init is the first line, already read through r, a PMI-1
// "cmd=init pmi_version=2"; claim takes the rank, or refuses it (the
// connection is then closed, and the error returned).
func ServeNamedV2(rw io.ReadWriteCloser, r *bufio.Reader, init string, job Job, allow Versions, claim func(rank int) error) error {
	c := &conn{rw: rw, r: r, rank: -1, job: job, allow: allow}
	cmd, err := ParseV1(init)
	version := ""
	if err == nil && cmd.Name == "init" {
		version, _ = cmd.Get("pmi_version")
	}
	if version != "2" || allow&V2 == 0 {
		rw.Close()
		return fmt.Errorf("want a PMI-2 init first, got %q", init)
	}
	c.acceptV2()
	body, err := c.readV2()
	if err != nil {
		rw.Close()
		return err
	}
	full, err := ParseV2(body)
	if err != nil || full.Name != "fullinit" {
		rw.Close()
		return fmt.Errorf("want fullinit after init, got %q", body)
	}
	id, ok := full.Get("pmiid")
	if !ok {
		id, ok = full.Get("pmirank")
	}
	rank, err := strconv.Atoi(id)
	if !ok || err != nil || rank < 0 {
		rw.Close()
		return fmt.Errorf("fullinit names no rank (pmiid or pmirank): %q", body)
	}
	if err := claim(rank); err != nil {
		rw.Close()
		return err
	}
	c.rank = rank
	c.job.Connected(rank)
	if err := c.handleV2(full); err != nil {
		rw.Close()
		return err
	}
	c.serve()
	return nil
}
