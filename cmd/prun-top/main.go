// Command prun-top is `prun top`'s terminal view, in a program of its own:
// prun runs it (from beside its own binary) for an interactive prun top,
// once it found the job. The view's libraries (Bubble Tea, Lip Gloss) are
// thus not linked into prun, whose every start would initialise them. It
// is not meant to be run by hand:
//
//	prun-top SOCKET JOB INTERVAL
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"prun/inspect"
	"prun/topview"
	"prun/topview/sample"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "prun-top: run by prun top (prun top --help)")
		os.Exit(2)
	}
	interval, err := time.ParseDuration(os.Args[3])
	if err != nil || interval <= 0 {
		fmt.Fprintf(os.Stderr, "prun top: --interval %s: not a positive duration\n", os.Args[3])
		os.Exit(2)
	}
	c, err := inspect.Dial(os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "prun top: %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	defer c.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	src := &sample.Warm{Source: c.Source(os.Args[2])}
	if err := topview.Run(ctx, src, topview.Options{Interval: interval}, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "prun top: %v\n", err)
		os.Exit(1)
	}
}
