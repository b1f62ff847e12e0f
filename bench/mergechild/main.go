package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/dsdelta/dsdelta/bench/internal/benchchild"
)

func main() {
	child := benchchild.Register(flag.CommandLine)
	flag.Parse()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err := child.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "mergechild:", err)
		os.Exit(1)
	}
}
