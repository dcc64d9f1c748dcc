package rsh

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"prun/internal/shellwords"
)

// startCommand starts argv on host with the external remote shell command
// opts.Command.
// label names the login in errors.
func startCommand(host, label string, argv []string, stdin []byte, opts Options) (*Session, error) {
	words, err := shellwords.Split(opts.Command)
	if err != nil {
		return nil, fmt.Errorf("%s: bad remote shell command %q: %v", label, opts.Command, err)
	}
	if len(words) == 0 {
		return nil, fmt.Errorf("%s: empty remote shell command", label)
	}
	args := words[1:len(words):len(words)]
	// OpenSSH's spelling, which rsh and most wrappers share: options
	// before the host.
	if opts.User != "" {
		args = append(args, "-l", opts.User)
	}
	if opts.Port != 0 {
		args = append(args, "-p", strconv.Itoa(opts.Port))
	}
	cmd := exec.Command(words[0], append(args, host, shellwords.Join(argv))...)
	host = label
	// A process group of its own: a terminal's ^C is the launcher's to
	// handle, and Close kills whatever the command started (a ProxyCommand).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s := &Session{host: host, done: make(chan struct{})}
	cmd.Stderr = &s.stderr
	cmd.WaitDelay = time.Second // for stderr held open by a leftover child

	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, hostErr(host, err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, hostErr(host, err)
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		if e := errors.Unwrap(err); e != nil {
			err = e
		}
		return nil, fmt.Errorf("%s: cannot run %s: %v", host, words[0], err)
	}
	s.stdout = outR
	s.feed(inW, opts.StdinHead, stdin)
	go func() {
		err := cmd.Wait()
		ps := cmd.ProcessState
		switch {
		case ps != nil && ps.Exited():
			s.finish(ps.ExitCode(), nil)
		case ps != nil:
			s.finish(-1, fmt.Errorf("%s: %s: %v", host, words[0], ps))
		default:
			s.finish(-1, hostErr(host, err))
		}
	}()
	s.closeFn = func() {
		inW.Close()
		go func() {
			select {
			case <-s.done:
			case <-time.After(closeGrace):
				if !isDone(s.done) { // once reaped, the pid may be someone else's
					syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				}
				cmd.Process.Kill()
				<-s.done
			}
			outR.Close()
		}()
	}
	return s, nil
}
