module prun

go 1.26.8

require (
	github.com/creack/pty v1.1.24
	github.com/fatih/color v1.19.0
	github.com/kevinburke/ssh_config v1.6.0
	github.com/mattn/go-isatty v0.0.20
	github.com/spf13/cobra v1.10.2
	github.com/spf13/pflag v1.0.9
	golang.org/x/crypto v0.58.0
	golang.org/x/sys v0.49.0
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
)
