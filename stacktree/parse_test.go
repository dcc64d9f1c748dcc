package stacktree

import (
	"reflect"
	"strings"
	"testing"
)

// gdbSample has the shapes of frames gdb prints: with and without an
// address, source or library; a C++ name whose template holds " (" and
// "(anonymous namespace)"; an operator(); arguments holding parentheses in
// strings; a signal frame; an unknown function; a versioned symbol.
const gdbSample = `[New LWP 101]
0x00007f in __libc_pause () at pause.c:29

Thread 2 (Thread 0x7f1 (LWP 101) "prog"):
#0  0x0000000000401000 in std::function<void (int)>::operator() (this=0x7ff, __args#0=3) at /usr/include/c++/12/bits/std_function.h:591
#1  0x0000000000401100 in (anonymous namespace)::worker (name=0x4020 "a (b) \" c)") at w.cc:7
#2  0x0000000000401200 in ?? ()
#2  0x0000000000401200 in ?? () from /lib/x86_64-linux-gnu/libmpich.so.12
#3  <signal handler called>
#4  0x00007f00 in clock_nanosleep@GLIBC_2.2.5 () from /lib/x86_64-linux-gnu/libc.so.6
#5  start_thread (arg=<optimized out>) at ./nptl/pthread_create.c:442
Backtrace stopped: previous frame inner to this frame (corrupt stack?)

Thread 1 (Thread 0x7f0 (LWP 100) "prog"):
#0  0x00007f in __libc_pause () at ../sysdeps/unix/sysv/linux/pause.c:29
#1  0x0000000000401300 in main (argc=1, argv=0x7ffe) at prog.c:20
[Inferior 1 (process 100) detached]
`

func TestParseGDB(t *testing.T) {
	th, err := Parse([]byte(gdbSample))
	if err != nil {
		t.Fatal(err)
	}
	want := []Thread{
		{ID: 101, Frames: []Frame{
			{Func: "std::function<void (int)>::operator()", File: "/usr/include/c++/12/bits/std_function.h", Line: 591},
			{Func: "(anonymous namespace)::worker", File: "w.cc", Line: 7},
			{Func: "??"},
			{Func: "?? (libmpich.so.12)"},
			{Func: "<signal handler called>"},
			{Func: "clock_nanosleep"},
			{Func: "start_thread", File: "./nptl/pthread_create.c", Line: 442},
		}},
		{ID: 100, Frames: []Frame{
			{Func: "__libc_pause", File: "../sysdeps/unix/sysv/linux/pause.c", Line: 29},
			{Func: "main", File: "prog.c", Line: 20},
		}},
	}
	if !reflect.DeepEqual(th, want) {
		t.Fatalf("got\n%+v\nwant\n%+v", th, want)
	}
	// A plain bt, without thread headers, is one thread.
	th, err = ParseGDB([]byte("#0  f () at a.c:1\n#1  0x1 in main ()\n"))
	if err != nil || len(th) != 1 || len(th[0].Frames) != 2 || th[0].Frames[1].Func != "main" {
		t.Fatalf("plain bt: %+v, %v", th, err)
	}
}

const euSample = `PID 100 - process
TID 100:
#0  0x00007f16f3b5bdf2 pause - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/unix/sysv/linux/pause.c:29:10
#1  0x0000562a5cbb223d hang_alone - /tmp/prog
#2  0x0000562a5cbb2106 main
#3  0x00007f16f3aaf305 __libc_start_main@@GLIBC_2.34
#4  0x0000562a5cbb2131
TID 101:
#0  0x00007f16f3b57545 clock_nanosleep@GLIBC_2.2.5
`

func TestParseEuStack(t *testing.T) {
	th, err := Parse([]byte(euSample))
	if err != nil {
		t.Fatal(err)
	}
	want := []Thread{
		{ID: 100, Frames: []Frame{
			{Func: "pause", File: "../sysdeps/unix/sysv/linux/pause.c", Line: 29},
			{Func: "hang_alone"}, {Func: "main"}, {Func: "__libc_start_main"}, {Func: "??"},
		}},
		{ID: 101, Frames: []Frame{{Func: "clock_nanosleep"}}},
	}
	if !reflect.DeepEqual(th, want) {
		t.Fatalf("got\n%+v\nwant\n%+v", th, want)
	}
}

// TestParseErrors: output without a frame is one line naming what the
// debugger said.
func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ out, want string }{
		{"", "gdb printed nothing"},
		{"Could not attach to process.  If your uid matches...\nptrace: Operation not permitted.\n", "Could not attach"},
		{"ptrace: No such process.\n", "ptrace: No such process."},
		{"eu-stack: dwfl_linux_proc_report pid 9: No such file or directory\n", "eu-stack: dwfl_linux_proc_report"},
		{"garbage\x1b[31m\n", "no stack from gdb: garbage?[31m"},
	} {
		_, err := Parse([]byte(c.out))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Parse(%q): %v, want one line with %q", c.out, err, c.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(gdbSample))
	f.Add([]byte(euSample))
	f.Add([]byte("#0 0x1 in f (a=\"(\") at x:1\n#1 operator<< (x=1)\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, parse := range []func([]byte) ([]Thread, error){Parse, ParseGDB, ParseEuStack} {
			th, err := parse(b)
			if err != nil {
				if strings.Contains(err.Error(), "\n") {
					t.Fatalf("error on two lines: %q", err)
				}
				continue
			}
			tr := New()
			tr.Add(0, th)
			tr.Add(1, th)
			tr.Finish()
			for _, x := range th {
				if len(x.Frames) == 0 {
					t.Fatal("a thread without frames")
				}
				for _, fr := range x.Frames {
					if fr.Func == "" {
						t.Fatal("a frame without a name")
					}
				}
			}
			tr.Text(Options{Collapse: true, Lines: true})
			tr.DOT(Options{})
		}
	})
}
