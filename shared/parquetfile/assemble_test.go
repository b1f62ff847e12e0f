package parquetfile

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// panickyChunk is a column chunk whose pages panic when read, as
// parquet-go does on some corrupt pages the page checks cannot see
// without decoding values.
type panickyChunk struct{ parquet.ColumnChunk }

func (c panickyChunk) Pages() parquet.Pages { return panickyPages{c.ColumnChunk.Pages()} }

type panickyPages struct{ parquet.Pages }

func (panickyPages) ReadPage() (parquet.Page, error) { panic("corrupt page") }

func TestAPanicDecodingPagesFailsTheColumnRead(t *testing.T) {
	type row struct {
		ID   int64  `parquet:"id"`
		Name string `parquet:"name"`
	}
	var buf bytes.Buffer
	if err := parquet.Write(&buf, []row{{1, "a"}, {2, "b"}}); err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	s := &colStream{leaf: 1, name: "name"}
	if err := s.open(panickyChunk{f.RowGroups()[0].ColumnChunks()[1]}); err != nil {
		t.Fatal(err)
	}
	defer s.close()
	_, err = s.next()
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "column 1 (name)") || !strings.Contains(err.Error(), "corrupt page") {
		t.Fatalf("err = %v, want ErrCorrupt naming column 1 (name) and the panic", err)
	}
}
