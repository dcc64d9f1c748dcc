package main

// submit.c is prun's submitter to a persistent runtime, which runs before
// Go's runtime starts (a C constructor); this file has cgo build it into
// prun.

import "C"
