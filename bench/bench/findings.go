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
		fmt.Sprintf("Merge CPU (%s, %s rows): re-encoding the row groups that hold a changed key — `delta.copyKeptValues`, one goroutine per column, %s cum (page decode, column writes, snappy encoding `s2.EncodeSnappy` %s); finding their dropped rows — `delta.readRowGroup` over the key column %s; copying the other row groups verbatim — `delta.(*rewriter).appendRowGroup` %s, their bytes read into memory first (`delta.(*storeReaderAt).prefetch` %s) and written out by the uploader (`objstore.(*local).Write` %s); the collector (`runtime.gcBgMarkWorker`) %s.",
			why, rows, share(m, pkgDelta+"copyKeptValues"), share(m, "github.com/klauspost/compress/s2.EncodeSnappy"), share(m, pkgDelta+"readRowGroup"), share(m, pkgDelta+"(*rewriter).appendRowGroup"), share(m, pkgDelta+"(*storeReaderAt).prefetch"), share(m, "github.com/dsdelta/dsdelta/shared/objstore.(*local).Write"), share(m, "runtime.gcBgMarkWorker")),
		fmt.Sprintf("Around the rewrite: the key lookup that finds the stored rows and their order (`cdc.lookup`) %s, the history append (`cdc.applyHistory`) %s, new rows written (`cdc.writeRows`) %s, commits (`delta.(*Transaction).Commit`) %s.",
			share(m, pkgCDC+"lookup"), share(m, pkgCDC+"applyHistory"), share(m, pkgCDC+"writeRows"), share(m, pkgDelta+"(*Transaction).Commit")),
	}
}

func heapFindings(rows, mode string, r mergebench.ChildResult, prof string) []string {
	m := cumShares(prof, "-sample_index=inuse_space")
	if len(m) == 0 {
		return nil
	}
	return []string{
		fmt.Sprintf("Peak memory (%s rows, %s batch, peak RSS %d MiB; %d MiB resident before the merge): the live heap at the peak is two buffers — `delta.(*storeReaderAt).prefetch` (%s of the in-use heap) holds the whole compressed row group of the file being copied, and parquet-go's `memory.newSlice` (%s, via `FileWriter.BytesWritten`/`flushBatch` → `ColumnWriter`) is the writer's buffered row group, up to `delta.DefaultRowGroupBytes` (16 MiB) or `delta.DefaultRowGroupRows` rows. With GOGC=100 the RSS reaches about twice the live heap, plus the process baseline.",
			rows, mode, r.PeakKiB>>10, r.BeforeKiB>>10, share(m, pkgDelta+"(*storeReaderAt).prefetch"), share(m, "github.com/parquet-go/parquet-go/internal/memory.newSlice[go.shape.uint8]")),
		"Levers for ≤ 256 MiB: smaller row groups bound both buffers (the reader's prefetch is one row group of the input, the writer buffers one of the output), reading column chunks page by page instead of prefetching the row group, and a GOMEMLIMIT in the functions (they set one) so the collector runs before the RSS doubles.",
	}
}

func decodeFindings(prof string, vsDuck, vsDuck1, droppedVsDuck float64) []string {
	m := cumShares(prof)
	if len(m) == 0 {
		return nil
	}
	return []string{
		fmt.Sprintf("JSON decode (%.1f× DuckDB on all cores, %.1f× DuckDB on one thread): dsdelta decodes 1 MiB chunks of the file on GOMAXPROCS goroutines and hands events over in file order. Per event, framing and validating the line while recording where its members lie (`datastream.scanValueSpans`) is %s cum, typing the payload (`datastream.convertJSONIn`) %s and building the event — metadata, ordering key, key values (`datastream.(*Reader).build`) — %s; no single function dominates any more.",
			vsDuck, vsDuck1, share(m, pkgDS+"scanValueSpans"), share(m, pkgDS+"convertJSONIn"), share(m, pkgDS+"(*Reader).build")),
		fmt.Sprintf("Keeping the events costs the rest: dropping each event once decoded takes %.2f× DuckDB's time. The kept events are handed over in the blocks the decoding goroutines filled (no copy), but the collector marks the growing heap of 472-byte `Event`s and their `[]any` rows, about twenty pointers an event, several times as it doubles (`runtime.gcBgMarkWorker` %s cum; `runtime.mallocgc` %s cum at about one allocation per event). The levers left: typed columns instead of `[]any` rows and pointer-dense `Event`s, and a faster scanner (SIMD-style structural indexing, as simdjson and DuckDB do).",
			droppedVsDuck, share(m, "runtime.gcBgMarkWorker"), share(m, "runtime.mallocgc")),
	}
}

func flat(m map[string][2]string, fn string) string {
	if v, ok := m[fn]; ok {
		return v[0]
	}
	return "<1%"
}

const pkgPipeline = "github.com/dsdelta/dsdelta/shared/pipeline."

func backfillCPUFindings(prof string, r backfillRun) []string {
	m := cumShares(prof)
	if len(m) == 0 {
		return nil
	}
	return []string{
		fmt.Sprintf("Backfill CPU (%.0f ms under the profiler): staging keeps %.1f of %d cores busy and the merge %.1f. Staging — `pipeline.(*Pipeline).Stage` %s cum: JSON decoding (`datastream.(*parallelJSON).decodeChunk`) %s, typing each file's columns from all its values (`datastream.(*Events).UnifyJSON`) %s, the staged Parquet written from the events (`pipeline.(*Pipeline).decode` %s in all). Merge — `pipeline.(*Pipeline).MergeTable` %s cum: the staged files read back into changes (`delta.ReadFileAt` %s), the history append (`cdc.applyHistory`) %s, the current state (`cdc.applyState`: latest change per key, keys sorted, rows written) %s. Across both, Parquet encoding (`delta.(*FileWriter).Write`) %s, the collector (`runtime.gcBgMarkWorker`) %s, and copying memory (`runtime.memmove`, flat) %s.",
			r.TotalMillis, cores(r.StageCPUMillis, r.StageMillis), r.Parallel, cores(r.MergeCPUMillis, r.MergeMillis),
			share(m, pkgPipeline+"(*Pipeline).Stage"), share(m, pkgDS+"(*parallelJSON).decodeChunk"), share(m, pkgDS+"(*Events).UnifyJSON"), share(m, pkgPipeline+"(*Pipeline).decode"),
			share(m, pkgPipeline+"(*Pipeline).MergeTable"), share(m, pkgDelta+"ReadFileAt"), share(m, pkgCDC+"applyHistory"), share(m, pkgCDC+"applyState"),
			share(m, pkgDelta+"(*FileWriter).Write"), share(m, "runtime.gcBgMarkWorker"), flat(m, "runtime.memmove")),
	}
}

func backfillHeapFindings(prof string, r backfillRun) []string {
	m := cumShares(prof, "-sample_index=inuse_space")
	if len(m) == 0 {
		return nil
	}
	return []string{
		fmt.Sprintf("Backfill peak memory (peak RSS %d MiB under the profiler; staging's peak %d MiB, the merge phase's %d MiB, %d events in %d batch(es), %.0f MB of staged Parquet): of the heap in use at the highest RSS, staging (`pipeline.(*Pipeline).decode`) holds %s and the merge (`pipeline.(*Pipeline).applyBatch`) %s — the staged rows a step reads back (`delta.ReadFileAt` %s), the changes built from them (`cdc.(*HistoryChanges).StateChange` %s, `Change` %s) and the state pass (`cdc.applyState`: latest change per key, sorted keys) %s. A step holds the changes of at most batch_max_events events (batches of at most %s); staging holds a part of as many events at most, and the next part while it writes one.",
			r.peakKiB>>10, r.StagePeakKiB>>10, r.MergePeakKiB>>10, r.Events, r.Batches, mb(r.StagedBytes),
			share(m, pkgPipeline+"(*Pipeline).decode"), share(m, pkgPipeline+"(*Pipeline).applyBatch"), share(m, pkgDelta+"ReadFileAt"), share(m, pkgCDC+"(*HistoryChanges).StateChange"), share(m, pkgCDC+"(*HistoryChanges).Change"), share(m, pkgCDC+"applyState"), batchLimits()),
	}
}
