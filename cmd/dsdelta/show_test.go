package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// twoFileTable writes a table on disk whose version 1 adds a file of ids
// 0-383 in three row groups of 128 rows (the fewest a row group holds),
// and version 2 a file of ids 384-386; it returns the folder and the two
// files' names.
func twoFileTable(t *testing.T) (dir, first, second string) {
	t.Helper()
	ctx := context.Background()
	dir = filepath.Join(t.TempDir(), "t")
	store, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	schema := value.StructType{Fields: []value.Field{{Name: "id", Type: value.Long}}}
	snap, err := delta.Create(ctx, store, delta.CreateOptions{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ids := range [][2]int64{{0, 384}, {384, 387}} {
		w, err := delta.NewFileWriter(ctx, store, delta.WriteOptions{Schema: schema, RowGroupRows: 128, DataChange: true})
		if err != nil {
			t.Fatal(err)
		}
		for id := ids[0]; id < ids[1]; id++ {
			if err := w.Write([]any{id}); err != nil {
				t.Fatal(err)
			}
		}
		add, err := w.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tx := snap.NewTransaction(delta.Operation{Name: "WRITE"})
		tx.Add(add)
		if snap, err = tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		names = append(names, add.Path)
	}
	return dir, names[0], names[1]
}

// breakLastRowGroup overwrites the page header of the last row group of a
// data file, leaving its footer and its other row groups readable: a read
// fails part-way through the file.
func breakLastRowGroup(t *testing.T, file string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	rgs := f.Metadata().RowGroups
	if len(rgs) != 3 {
		t.Fatalf("%s has %d row groups, want 3", file, len(rgs))
	}
	pos := rgs[2].Columns[0].MetaData.DataPageOffset
	copy(b[pos:], bytes.Repeat([]byte{0xff}, 8))
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestShowOfATableWithADamagedDataFile(t *testing.T) {
	tests := []struct {
		name string
		// damage breaks one file of the table and returns its name.
		damage  func(t *testing.T, dir, first, second string) string
		problem string // how --skip-missing names it
		// ids shown with --skip-missing, as the table format and as
		// JSON lines (which cannot take back rows printed before a
		// file fails part-way through).
		ids, jsonIDs []int
		printed      string
	}{
		{"a deleted data file", func(t *testing.T, dir, _, second string) string {
			if err := os.Remove(filepath.Join(dir, second)); err != nil {
				t.Fatal(err)
			}
			return second
		}, "missing", idRange(0, 384), idRange(0, 384), ""},
		{"a data file whose footer is garbage", func(t *testing.T, dir, _, second string) string {
			if err := os.WriteFile(filepath.Join(dir, second), []byte("PAR1 garbage PAR1"), 0o644); err != nil {
				t.Fatal(err)
			}
			return second
		}, "unreadable", idRange(0, 384), idRange(0, 384), ""},
		{"a data file that fails after two of its row groups", func(t *testing.T, dir, first, _ string) string {
			breakLastRowGroup(t, filepath.Join(dir, first))
			return first
		}, "unreadable", idRange(384, 387), slices.Concat(idRange(0, 256), idRange(384, 387)), "its first 256 rows were printed before the error"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" fails show, naming the file and the version, unless --skip-missing", func(t *testing.T) {
			dir, first, second := twoFileTable(t)
			bad := tt.damage(t, dir, first, second)

			out, errOut, code := cli(t, "show", dir)
			if code != 1 || !strings.Contains(errOut, bad) || !strings.Contains(errOut, "version 2") || !strings.Contains(errOut, "--skip-missing") {
				t.Fatalf("show = %d, want 1 naming %s, version 2 and --skip-missing\n%s\n%s", code, bad, out, errOut)
			}

			out, errOut, code = cli(t, "show", dir, "--skip-missing")
			if code != 0 {
				t.Fatalf("show --skip-missing = %d, want 0\n%s\n%s", code, out, errOut)
			}
			if got := shownIDs(t, out, "table"); !slices.Equal(got, tt.ids) {
				t.Errorf("ids shown = %v, want %v\n%s", got, tt.ids, out)
			}
			trailer := "(" + strconv.Itoa(len(tt.ids)) + " rows, version 2, 1 of 2 data files skipped)"
			if !strings.HasSuffix(out, trailer+"\n") {
				t.Errorf("show does not end with %q:\n%s", trailer, out)
			}
			for _, want := range []string{"1 of 2 data files of version 2 skipped", "skipped " + tt.problem + " data file " + bad} {
				if !strings.Contains(errOut, want) {
					t.Errorf("stderr lacks %q:\n%s", want, errOut)
				}
			}

			out, errOut, code = cli(t, "show", dir, "--skip-missing", "--format", "jsonl")
			if code != 0 {
				t.Fatalf("show --skip-missing --format jsonl = %d, want 0\n%s\n%s", code, out, errOut)
			}
			if got := shownIDs(t, out, "jsonl"); !slices.Equal(got, tt.jsonIDs) {
				t.Errorf("ids printed = %v, want %v\n%s", got, tt.jsonIDs, out)
			}
			if !strings.Contains(errOut, "1 of 2 data files of version 2 skipped") || !strings.Contains(errOut, tt.printed) {
				t.Errorf("stderr does not say what was skipped (%q):\n%s", tt.printed, errOut)
			}
		})
	}
	t.Run("an older version without the damaged file shows as before", func(t *testing.T) {
		dir, _, second := twoFileTable(t)
		if err := os.Remove(filepath.Join(dir, second)); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := cli(t, "show", dir, "--version", "1")
		if code != 0 || !slices.Equal(shownIDs(t, out, "table"), idRange(0, 384)) || errOut != "" {
			t.Fatalf("show --version 1 = %d\n%s\n%s", code, out, errOut)
		}
	})
}

// idRange returns the ids from up to (not including) to.
func idRange(from, to int) []int {
	ids := make([]int, 0, to-from)
	for id := from; id < to; id++ {
		ids = append(ids, id)
	}
	return ids
}

// shownIDs returns the ids show printed, sorted (files are read in path
// order, and paths are random), from the table format (a header, the rows,
// a closing line in parentheses) or JSON lines.
func shownIDs(t *testing.T, out, format string) []int {
	t.Helper()
	var ids []int
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		s := strings.TrimSpace(line)
		if format == "jsonl" {
			s = strings.TrimSuffix(strings.TrimPrefix(s, `{"id":`), "}")
		} else if s == "id" || strings.HasPrefix(s, "(") {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("not a row of an id: %q", line)
		}
		ids = append(ids, n)
	}
	slices.Sort(ids)
	return ids
}
