package pipeline

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/dssim"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

func TestRunOnce(t *testing.T) {
	ctx := context.Background()
	good := []string{`{"id":1,"n":5}`, `{"id":2,"n":6}`}
	// setup writes two good files of shop.t and a bad one to a source.
	setup := func(t *testing.T) (*Pipeline, objstore.Store) {
		t.Helper()
		source := objstore.NewMemory()
		write(t, ctx, source, []dssim.File{
			jsonlFile("a", 10, good[0]),
			jsonlFile("b", 20, good[1]),
			{Name: "shop_t/2026/01/05/10/00/c_mysql-cdc-binlog_1_0_0.jsonl", Data: []byte("{\"uuid\":\"a\",\n not json\n")},
		})
		return newPipeline(t, source, config.Config{}), source
	}

	t.Run("a pass stages every file, merges and maintains the table, and counts what it did", func(t *testing.T) {
		p, source := setup(t)
		var progress []StageProgress
		res, err := p.RunOnce(ctx, RunOptions{Source: source, Parallel: 2, Progress: func(pr StageProgress) { progress = append(progress, pr) }})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Files) != 3 || res.Skipped != 0 || !reflect.DeepEqual(res.Merged, []string{"shop.t"}) || len(res.Busy) != 0 {
			t.Fatalf("RunOnce = %+v, want 3 files staged and shop.t merged", res)
		}
		tr := res.Tables["shop.t"]
		want := TableRun{StagedFiles: 2, StagedEvents: 2, MergedFiles: 2, MergedEvents: 2, Inserted: 2, StateVersion: tr.StateVersion, HistoryVersion: tr.HistoryVersion}
		if tr == nil || *tr != want || tr.StateVersion < 1 || tr.HistoryVersion < 1 {
			t.Fatalf("shop.t = %+v, want %+v with versions", tr, want)
		}
		if len(progress) != 3 || progress[2].Done != 3 || progress[2].Total != 3 {
			t.Errorf("progress = %+v, want one call per file ending at 3/3", progress)
		}
		u, err := p.Unmerged(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The bad file names no table it could be read from.
		if len(u) != 1 || u[0].Table != UnknownTable || len(u[0].Pending) != 0 || len(u[0].Quarantined) != 1 || !strings.Contains(u[0].Quarantined[0].Name, "/c_") {
			t.Fatalf("Unmerged = %+v, want the bad file quarantined and nothing pending", u)
		}
		if tr := res.Tables[UnknownTable]; tr == nil || *tr != (TableRun{StateVersion: -1, HistoryVersion: -1}) {
			t.Errorf("the unknown table = %+v, want a row with nothing done and no versions", tr)
		}
	})

	t.Run("files the registry knows, quarantined ones included, are not staged again", func(t *testing.T) {
		p, source := setup(t)
		first, err := p.RunOnce(ctx, RunOptions{Source: source})
		if err != nil {
			t.Fatal(err)
		}
		res, err := p.RunOnce(ctx, RunOptions{Source: source})
		if err != nil {
			t.Fatal(err)
		}
		tr := res.Tables["shop.t"]
		if len(res.Files) != 0 || len(res.Merged) != 0 || tr == nil || tr.StagedFiles != 0 || tr.MergedFiles != 0 || tr.StateVersion != first.Tables["shop.t"].StateVersion {
			t.Fatalf("second pass = %+v (shop.t %+v), want nothing staged or merged and the same version", res, tr)
		}
	})

	t.Run("a table whose lease another process holds is left pending without waiting", func(t *testing.T) {
		p, source := setup(t)
		if _, err := p.Leaser.Acquire(ctx, "shop.t", "other/1", time.Minute); err != nil {
			t.Fatal(err)
		}
		var told []coord.TableStatus
		res, err := p.RunOnce(ctx, RunOptions{Source: source, Busy: func(st coord.TableStatus) { told = append(told, st) }})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(res.Busy, []string{"shop.t"}) || len(res.Merged) != 0 {
			t.Fatalf("RunOnce = %+v, want shop.t busy", res)
		}
		if len(told) != 1 || told[0].Table != "shop.t" || told[0].LeaseHolder != "other/1" {
			t.Fatalf("told %+v, want shop.t held by other/1 once", told)
		}
		if tr := res.Tables["shop.t"]; tr.StagedFiles != 2 || tr.MergedFiles != 0 || tr.StateVersion != -1 {
			t.Errorf("shop.t = %+v, want 2 staged, none merged, no table yet", tr)
		}
		u, err := p.Unmerged(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(u) != 2 || u[1].Table != "shop.t" || len(u[1].Pending) != 2 || len(u[1].Quarantined) != 0 {
			t.Fatalf("Unmerged = %+v, want 2 files of shop.t pending", u)
		}
	})

	t.Run("a waiting pass merges a busy table once its lease is free", func(t *testing.T) {
		p, source := setup(t)
		l, err := p.Leaser.Acquire(ctx, "shop.t", "other/1", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		var told int
		res, err := p.RunOnce(ctx, RunOptions{Source: source, Wait: true, Poll: time.Millisecond, Busy: func(st coord.TableStatus) {
			if told++; told == 2 {
				if err := p.Leaser.Release(ctx, l); err != nil {
					t.Error(err)
				}
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		if told != 2 || !reflect.DeepEqual(res.Merged, []string{"shop.t"}) || len(res.Busy) != 0 {
			t.Fatalf("RunOnce = %+v after %d busy looks, want shop.t merged after 2", res, told)
		}
		if tr := res.Tables["shop.t"]; tr.MergedFiles != 2 || tr.StateVersion < 1 {
			t.Errorf("shop.t = %+v, want 2 files merged", tr)
		}
	})

	t.Run("a waiting pass stops when its context ends", func(t *testing.T) {
		p, source := setup(t)
		if _, err := p.Leaser.Acquire(ctx, "shop.t", "other/1", time.Minute); err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithCancel(ctx)
		_, err := p.RunOnce(cctx, RunOptions{Source: source, Wait: true, Poll: time.Hour, Busy: func(coord.TableStatus) { cancel() }})
		if err != context.Canceled {
			t.Fatalf("RunOnce = %v, want context.Canceled", err)
		}
	})
}

func TestTableRunAddSumsPassesAndKeepsKnownVersions(t *testing.T) {
	sum := TableRun{StateVersion: -1, HistoryVersion: -1}
	sum.Add(TableRun{StagedFiles: 2, StagedEvents: 20, MergedFiles: 2, MergedEvents: 20, Inserted: 5, Updated: 3, Deleted: 1, Stale: 2, StateVersion: 4, HistoryVersion: 6})
	sum.Add(TableRun{StagedFiles: 1, StagedEvents: 7, Inserted: 1, StateVersion: -1, HistoryVersion: 9})
	want := TableRun{StagedFiles: 3, StagedEvents: 27, MergedFiles: 2, MergedEvents: 20, Inserted: 6, Updated: 3, Deleted: 1, Stale: 2, StateVersion: 4, HistoryVersion: 9}
	if sum != want {
		t.Fatalf("sum = %+v, want %+v", sum, want)
	}
}
