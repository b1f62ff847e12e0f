package main

import (
	"fmt"
	"strings"
)

// pastRun is the SUMMARY of an earlier full run of this tool, kept so
// RESULTS.md records each target before and after the fixes its profiles
// led to. The figures are ratios measured within each run, so they compare
// across runs where absolute times would not.
type pastRun struct {
	commit, change                    string
	decode, merge, scaling, peak, p50 string
	// The backfill scenario's figures: "NA" for runs before it existed.
	backfill, backfillEventsPerS, backfillPeak string
	// Figures of scenarios added later (random merge with deletion vectors,
	// latency p99, scd2 over current): "NA" for runs before them.
	randomDV, p99, scd2 string
	// perChangedRow is the clustered merge's µs per changed row into 100k,
	// 1M and 10M rows, as "a / b / c": "NA" for runs before the figure.
	perChangedRow string
}

// pastRuns are the full runs committed with RESULTS.md, oldest first.
var pastRuns = []pastRun{
	{"3099318", "first measurement: rows decoded and re-encoded one by one", "4.61", "4.82", "10.24", "409", "NA", "NA", "NA", "NA", "NA", "NA", "NA", "NA"},
	{"5c25816", "row groups without a changed key spliced verbatim into the rewritten file", "4.87", "2.88", "4.29", "174", "NA", "NA", "NA", "NA", "NA", "NA", "NA", "NA"},
	{"ebe9c64", "row groups skipped by their key bounds in the lookup and the rewrite", "4.76", "2.29", "1.79", "172", "337", "NA", "NA", "NA", "NA", "NA", "NA", "NA"},
	{"24ee5f7", "faster JSON scanner (package benchmark 1.6×; this scenario did not move)", "4.91", "2.40", "1.28", "168", "260", "NA", "NA", "NA", "NA", "NA", "NA", "NA"},
	{"837a6a4", "touched row groups re-encoded column by column on all cores, row groups capped at 122,880 rows, standard-level Snappy; JSON lines decoded in parallel in file order, 6.6 allocations per event instead of 34", "1.77", "0.72", "1.68", "128", "337", "NA", "NA", "NA", "NA", "NA", "NA", "NA"},
	{"d2bbbce", "decode row for dsdelta dropping each event once decoded (information); no code change: the spread from the run above is run-to-run noise", "1.70", "0.68", "1.45", "126", "326", "NA", "NA", "NA", "NA", "NA", "NA", "NA"},
	{"8ec780f", "JSON: events kept in blocks the decoding goroutines fill in place (no growing slice, no copy), payload values boxed from slabs (1 allocation per event instead of 6.6), the validating scan marks strings that need no unescaping, per-file caches in event building, 472-byte events; Avro: blocks decoded in parallel, 0.3 allocations per event; local writes start disk writeback every 8 MiB so the fsync before publishing a large file waits for the last chunk only; maintenance holds a table's lease for compaction only", "0.94", "0.69", "1.45", "133", "344", "NA", "NA", "NA", "NA", "NA", "NA", "NA"},
	{"eefe5d9", "backfill scenario added; staging in parts and merging in steps of at most batch_max_events (100k) events, batch limits by events and source bytes; history dedupe pruned by source time; a step's history and state written on two cores, its staged parts read on all cores; repeated strings shared by the row reader; GCS as an objstore driver", "0.79", "0.60", "2.18", "98", "252", "4.34", "34975", "438", "NA", "NA", "NA", "NA"},
	{"def86e1", "deletion vectors (merge marks replaced rows, compaction folds them), bloom filters and page-index key lookup on state files, compaction without the lease, table modes soft_delete and scd2, merge CPU cut (history dedupe by row-group time bounds, prefix key sort, parallel key walk, column-wise Parquet writes)", "0.84", "0.51", "1.87", "112", "180", "6.86", "74661", "383", "2.67", "343", "2.63", "NA"},
	{"4ae0929", "a batch larger than batch_max_events merged in key ranges over key-sorted staged parts (each row of a bulk load written once), batches no longer cut by events and of up to 1 GiB of source; scd2 compaction keeps closed versions in files apart from open ones, which the merge skips", "0.96", "0.52", "1.97", "109", "188", "2.96", "116763", "401", "3.00", "351", "1.56", "NA"},
	{"1ef7bac", "fewer allocations per event: history rows, merge reads (strings and values cut from shared blocks) and changes built from slabs, partition keys and state metadata without per-row allocations, inferred JSON numbers typed without rendering their text", "0.76", "0.52", "2.27", "110", "201", "3.88", "129236", "342", "3.58", "423", "1.65", "NA"},
	{"48cc893", "the history written once, at staging: a staged part of one source date whose events are new to its batch and to the history (key hashes) is committed to the history as a copy (server-side on GCS), and the merge reads such parts for the state alone; flat Parquet files read column by column from the pages' typed values; flat rows written without a per-row buffer", "0.72", "0.50", "1.89", "107", "202", "2.04", "169907", "363", "3.34", "404", "1.59", "NA"},
	{"274369a", "the state upserts of a large step written in key ranges on all cores (one file each); JSON rows typed into slabs", "0.90", "0.51", "2.18", "113", "220", "2.56", "136781", "364", "3.25", "783", "1.81", "NA"},
	{"b7934a4", "JSON lines of the same columns share one inferred schema (a third fewer bytes allocated by the decoder); the backfill is now the fastest of three alternating runs a side", "0.79", "0.51", "1.69", "114", "226", "2.59", "155668", "306", "2.15", "507", "1.41", "NA"},
	{"0c77628", "a step's latest change per key found by merging its staged parts' key-sorted runs (no map, no sort); no map of the keys where no file can hold one", "0.94", "0.48", "2.10", "104", "333", "2.59", "130419", "308", "4.23", "1186", "1.59", "NA"},
	{"ae4aa66", "key-range steps hand on the rows they decoded past their span, so each staged row is decoded once; a staged part's rows converted in the order they were decoded and written in key order", "1.00", "0.49", "2.10", "114", "317", "2.35", "119636", "356", "2.50", "775", "1.30", "NA"},
	{"3bdb390", "a staged part's columns put in key order one at a time; flat values converted into their place in the batch (no Level copies); a step's key-sorted runs merged in key ranges on all cores", "0.88", "0.52", "1.64", "108", "251", "2.14", "195804", "373", "3.06", "528", "1.26", "NA"},
	{"5e96d9b", "a staged part opened once for all the steps of its batch; a copied part's state rows written as read; JSON events typed in their own rows", "0.81", "0.53", "1.93", "112", "226", "2.15", "180281", "366", "2.99", "562", "1.50", "NA"},
	{"14c6b37", "a process given GOMEMLIMIT collects when its heap reaches the limit, not each time it doubles: the backfill child runs with the merge function's limit in a 512 MiB instance (409 MiB); a large file's next part decoded while one is written, where the limit holds it", "0.82", "0.51", "2.08", "113", "222", "1.68", "237829", "421", "3.18", "476", "1.87", "NA"},
	{"c9eb989", "inferred timestamp columns read without building a time.Time; a staged part's ordered columns handed to parquet-go whole batches at a time, without a copy into the column batches", "0.80", "0.46", "2.06", "116", "266", "1.48", "195347", "421", "2.77", "766", "1.31", "NA"},
	{"05eb731", "a written file's add.stats read from the column chunk statistics parquet-go keeps for its footer, not from every value again; a local copy to a new name (a staged part committed to the history) is a hard link; a staged part's key hashes written beside it; a merge's steps gather and read their changes into arrays reused from step to step, without key texts for changes read for the state alone; a batch's colliding key hashes merged on all cores; a staged part's history rows rendered into one reused array; the backfill is now the fastest of five alternating runs a side", "0.99", "0.47", "2.31", "114", "211", "1.61", "268325", "421", "2.83", "2419", "1.59", "NA"},
	{"9ee1e16", "a local copy made by a hard link stamped as new (vacuum ages it from the copy), the backfill's run-by-run ratios reported; no other change to the code measured: the spread from the run above is the host's", "0.91", "0.52", "1.93", "112", "297", "1.34", "201962", "420", "2.79", "909", "1.66", "NA"},
	{"c89e941", "a staged part's rows converted 256 at a time, column after column; the backfill's merge starts with what staging left resident, as in `dsdelta run` (the bench no longer returns it to the system between the phases)", "0.86", "0.51", "2.14", "108", "280", "1.42", "259306", "422", "3.44", "677", "1.33", "NA"},
	{"ef6e34d", "a sparse read (the merge's key lookups) tests a page's keys and takes the matched rows' values where the page stores them, not from every value made into a parquet.Value; page headers read without reflection; JSON columns already of their unified type not converted again; wide decimals' Parquet bounds valid (no effect on these scenarios)", "0.88", "0.42", "2.23", "114", "210", "1.49", "280419", "422", "2.58", "490", "1.35", "NA"},
	{"dba45c5", "the arrays a staged part's rows are converted into taken again from part to part and file to file (delta.ValueArrays), not made anew and faulted in under the memory limit each time; a staged part's key codes given their room once", "0.90", "0.46", "2.11", "112", "204", "1.55", "254234", "421", "2.74", "393", "1.64", "NA"},
	{"ef69321", "JSON payloads inferred and unified with their rows, kinds, converted values and decimal types cut from slabs (0.27 allocations an event staged instead of 6.3); a file's table checked by its id, not its text; every ratio with a target now divides the medians of at least 5 runs a side, run in turn (the runs above compared the best of 1 to 9), and the merge's cost per changed row is reported", "0.81", "0.47", "2.13", "108", "207", "1.44", "273416", "422", "3.22", "367", "1.56", "NA"},
	{"5751e59", "since ef69321: the history's duplicate check asks the state side first; history copies decided by each step's own lookup and committed in the last step; the Parquet reader and writer in parquetfile, parquet-go v0.32.1; exact bounds on rewrite; statistics columns where pruning needs them; clients built as an instance starts, a new table's state and tombstones created at once", "0.49", "0.59", "2.19", "119", "626", "0.87", "168054", "423", "1.79", "13966", "1.33", "22.48 / 45.08 / 49.19"},
	{"707b835", "since 5751e59: no change to the code measured (staging's rows written column by column was tried and reverted: no CPU saved); the sustained scenario runs first, so its peak RSS is its loop's; the spread from the run above is the host's", "0.98", "0.51", "2.01", "119", "219", "1.22", "239709", "422", "2.35", "441", "1.42", "13.40 / 23.42 / 26.90"},
	{"0feb9f5", "since 707b835: `run --watch` stages beside merging and maintains once merging has caught up or every 10 s (pipeline.Watch), the loop the sustained scenario runs; no change to the code the other scenarios measure: their spread from the run above is the host's", "0.86", "0.54", "2.04", "121", "205", "1.28", "234920", "422", "2.31", "493", "1.39", "14.04 / 24.00 / 28.67"},
	{"8f6c8f9", "since 0feb9f5: maintenance compacts at most compaction_max_bytes a run (small files first, then the most-deleted), `run --watch` a slice at a time between merges, and hands a merge over after 10 s so a table that never catches up is maintained (the sustained scenario's loop); a string key lookup finds a page's keys with a cursor, not a set of the batch's keys (the merges' lookups); files packed smallest first", "0.94", "0.53", "2.05", "120", "214", "1.31", "229643", "423", "2.24", "2497", "1.43", "13.43 / 23.53 / 27.58"},
}

// historyMarkdown renders the earlier runs and this one as one table.
func (r *report) historyMarkdown(change string) string {
	var b strings.Builder
	b.WriteString("\n## Before and after\n\n")
	b.WriteString("SUMMARY figures of the earlier full runs committed with this file (same tool, same kind of 2-core machine) and of this run; the change is what each run measured for the first time.\n\n")
	b.WriteString("| run | change | JSON decode vs DuckDB | merge vs DuckDB | 10M / 100k | peak MiB | latency p50 ms | backfill vs DuckDB | backfill events/s | backfill peak MiB | random 10M / 100k (DVs) | latency p99 ms | scd2 vs current | merge µs per changed row 100k / 1M / 10M |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	times := func(s string) string {
		if s == "NA" {
			return s
		}
		return s + "×"
	}
	for _, p := range pastRuns {
		fmt.Fprintf(&b, "| %s | %s | %s× | %s× | %s× | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", p.commit, p.change, p.decode, p.merge, p.scaling, p.peak, p.p50, times(p.backfill), p.backfillEventsPerS, p.backfillPeak, times(p.randomDV), p.p99, times(p.scd2), p.perChangedRow)
	}
	f := func(v float64, format string) string {
		if v == 0 {
			return "NA"
		}
		return fmt.Sprintf(format, v)
	}
	run := "this run"
	if r.quick {
		run += " (--quick: smaller data, not comparable)"
	}
	perRow := "NA"
	if u := r.mergeUsPerChangedRow; u != [3]float64{} {
		perRow = f(u[0], "%.2f") + " / " + f(u[1], "%.2f") + " / " + f(u[2], "%.2f")
	}
	fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", run, change, f(r.decodeRatio, "%.2f×"), f(r.mergeRatio, "%.2f×"), f(r.scalingRatio, "%.2f×"), f(r.peakMiB, "%.0f"), f(r.latencyP50, "%.0f"),
		f(r.backfillRatio, "%.2f×"), f(r.backfillEventsPerS, "%.0f"), f(r.backfillPeakMiB, "%.0f"), f(r.randomDVRatio, "%.2f×"), f(r.latencyP99, "%.0f"), f(r.scd2Ratio, "%.2f×"), perRow)
	return b.String()
}

// thisChange names what the code measured by this run changed since the
// last entry of pastRuns; move it there with the run's figures when
// RESULTS.md is committed.
const thisChange = "since 8f6c8f9: a late event looked for in the history page by page (readKeyed), holding only the rows of a wanted (key, order); a key lookup reads only the pages of the keys a row group's bloom filter may hold, and probes the filter when it costs fewer bytes than the key pages selected; a page's span of string keys found by comparing strings; a merge's lease brings its tables' snapshots up to date with the commits since, instead of reading each whole at every step"
