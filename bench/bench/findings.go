package main

import (
	"fmt"
	"github.com/dsdelta/dsdelta/bench/internal/mergebench"
	"os/exec"
	"strings"
)

// cumShares reads `go tool pprof -top -cum` of a profile into function →
// (flat%, cum%) as printed.
func cumShares(prof string, extra ...string) map[string][2]string {
	out := map[string][2]string{}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return out
	}
	args := append(append([]string{"tool", "pprof", "-top", "-cum", "-nodecount=400"}, extra...), prof)
	b, err := exec.Command(goBin, args...).Output()
	if err != nil {
		return out
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		// flat flat% sum% cum cum% name...
		if len(f) < 6 || !strings.HasSuffix(f[1], "%") || !strings.HasSuffix(f[4], "%") {
			continue
		}
		name := strings.TrimSuffix(strings.Join(f[5:], " "), " (inline)")
		out[name] = [2]string{f[1], f[4]}
	}
	return out
}

// share formats the cum% of fn, or "?" when the profile has no such node.
func share(m map[string][2]string, fn string) string {
	if v, ok := m[fn]; ok {
		return v[1]
	}
	return "<1%"
}

const (
	pkgDelta = "github.com/dsdelta/dsdelta/shared/delta."
	pkgCDC   = "github.com/dsdelta/dsdelta/shared/cdc."
	pkgDS    = "github.com/dsdelta/dsdelta/shared/datastream."
)

func mergeCPUFindings(why, rows, prof string) []string {
	m := cumShares(prof)
	if len(m) == 0 {
		return nil
	}
	return []string{
		fmt.Sprintf("Merge CPU (%s, %s rows): copying the touched files is the merge — `delta.readRowGroup` (reading the old file, with the copy loop and the writer called from its callback) is %s cum; row assembly `delta.(*asm).read` alone is %s (one `[]any` and boxed values per row).",
			why, rows, share(m, pkgDelta+"readRowGroup"), share(m, pkgDelta+"(*asm).read")),
		fmt.Sprintf("`delta.(*FileWriter).BytesWritten` is %s cum (%s rows): cdc's `rolling.Write` calls it after every row to decide when to roll, and it calls `flushBatch`, so parquet-go's `WriteRows` receives one row per call and the 128-row batching of `FileWriter.Write` never takes effect. Checking the size every few thousand rows, or having FileWriter keep a running estimate without flushing, removes most of this. `delta.(*FileWriter).Write` (shredding + stats) is another %s, snappy encoding %s.",
			share(m, pkgDelta+"(*FileWriter).BytesWritten"), rows, share(m, pkgDelta+"(*FileWriter).Write"), share(m, "github.com/klauspost/compress/snappy.Encode")),
		fmt.Sprintf("The key lookup (`cdc.lookup`) is %s and the history append (`cdc.applyHistory`) %s: the work is the copy-on-write rewrite, which is why a file rolled at 128 MiB bounds how small a merge can be.",
			share(m, pkgCDC+"lookup"), share(m, pkgCDC+"applyHistory")),
	}
}

func heapFindings(rows, mode string, r mergebench.ChildResult, prof string) []string {
	m := cumShares(prof, "-sample_index=inuse_space")
	if len(m) == 0 {
		return nil
	}
	return []string{
		fmt.Sprintf("Peak memory (%s rows, %s batch, peak RSS %d MiB; %d MiB resident before the merge): the live heap at the peak is two buffers — `delta.(*storeReaderAt).prefetch` (%s of the in-use heap) holds the whole compressed row group of the file being copied, and parquet-go's `memory.newSlice` (%s, via `FileWriter.BytesWritten`/`flushBatch` → `ColumnWriter`) is the writer's buffered row group, up to `delta.DefaultRowGroupBytes` (16 MiB) uncompressed plus its pages. With GOGC=100 the RSS reaches about twice the live heap, plus the process baseline.",
			rows, mode, r.PeakKiB>>10, r.BeforeKiB>>10, share(m, pkgDelta+"(*storeReaderAt).prefetch"), share(m, "github.com/parquet-go/parquet-go/internal/memory.newSlice[go.shape.uint8]")),
		"Levers for ≤ 256 MiB: a smaller row group for rewritten files (e.g. 16 MiB) bounds both buffers (the reader's prefetch is one row group of the input), reading column chunks page by page instead of prefetching the row group, and a GOMEMLIMIT in the functions so the collector runs before the RSS doubles.",
	}
}

func decodeFindings(prof string, vsDuck, vsDuck1 float64) []string {
	m := cumShares(prof)
	if len(m) == 0 {
		return nil
	}
	return []string{
		fmt.Sprintf("JSON decode: dsdelta decodes a file on one goroutine; it takes %.1f× DuckDB's time on all cores and %.1f× DuckDB's time on one thread, so parallelism explains little of the gap. Field scanning dominates: `datastream.eachMember` %s cum, `datastream.scanString` %s flat, `datastream.unquote` %s cum, `datastream.typePayload` %s cum, `datastream.genericJSON` %s cum (json.go decodes each line's source_metadata into a generic `map[string]any`), `datastream.convertJSON` %s cum.",
			vsDuck, vsDuck1, share(m, pkgDS+"eachMember"), flat(m, pkgDS+"scanString"), share(m, pkgDS+"unquote"), share(m, pkgDS+"typePayload"), share(m, pkgDS+"genericJSON"), share(m, pkgDS+"convertJSON")),
		fmt.Sprintf("Allocation and GC are a large share: `runtime.mallocgc` %s cum, `runtime.gcBgMarkWorker` %s cum, `runtime.slicebytetostring` %s — strings are copied out of the line for every key and value; interning the strings that repeat on every line (object, read_method, stream_name, schema_key, the source_metadata keys and table names) and reading source_metadata into a struct instead of a generic map would cut both.",
			share(m, "runtime.mallocgc"), share(m, "runtime.gcBgMarkWorker"), share(m, "runtime.slicebytetostring")),
	}
}

func flat(m map[string][2]string, fn string) string {
	if v, ok := m[fn]; ok {
		return v[0]
	}
	return "<1%"
}
