// Command mergechild applies the benchmark batch to one benchmark table and
// prints the time and its own peak RSS as JSON. The bench driver builds and
// runs it so the memory figure is the merge's: this binary links what a
// merge function links, not DuckDB.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/dsdelta/dsdelta/bench/internal/mergebench"
)

func main() {
	dir := flag.String("dir", "", "table directory (state, history, tombstones below it)")
	rows := flag.Int64("rows", 0, "rows of the base table")
	mode := flag.String("mode", "clustered", "batch key distribution: clustered or random")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the merge here")
	heapProfile := flag.String("heapprofile", "", "write the heap profile taken at the highest RSS here")
	flag.Parse()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err := mergebench.RunChild(context.Background(), *dir, *rows, *mode, *cpuProfile, *heapProfile); err != nil {
		fmt.Fprintln(os.Stderr, "mergechild:", err)
		os.Exit(1)
	}
}
