// Command headroom tells you whether a local LLM fits your machine, and how
// to run it with llama.cpp, before you download it. Run 'headroom help'.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/headroom-llm/headroom/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.Env{Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv})
	stop()
	os.Exit(code)
}
