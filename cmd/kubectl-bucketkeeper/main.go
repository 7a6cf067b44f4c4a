package main

import (
	"context"
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}))
}
